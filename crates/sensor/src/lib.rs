//! Pure logic: the sensor expression language (lexer, parser, checker, compiled program, tri-state evaluator).
