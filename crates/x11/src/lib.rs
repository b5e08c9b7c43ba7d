//! IO edge for X11: window listing, capture, window tracking, the single XTest input sink, user-input watch.
