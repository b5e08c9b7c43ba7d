//! X keysym names ↔ values and chord parsing (`"ctrl+Pause"`), shared by the executor and the input sink.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An X keysym value (e.g. 0x77 for `w`, 0xff0d for `Return`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Keysym(pub u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("unknown key name {0:?} (use an X keysym name such as w, Return, Escape, Left, F5, Control_L)")]
    UnknownKey(String),
    #[error("empty key chord")]
    EmptyChord,
}

const NAMED: &[(&str, u32)] = &[
    ("space", 0x20),
    ("apostrophe", 0x27),
    ("comma", 0x2c),
    ("minus", 0x2d),
    ("period", 0x2e),
    ("slash", 0x2f),
    ("semicolon", 0x3b),
    ("equal", 0x3d),
    ("bracketleft", 0x5b),
    ("backslash", 0x5c),
    ("bracketright", 0x5d),
    ("grave", 0x60),
    ("BackSpace", 0xff08),
    ("Tab", 0xff09),
    ("Return", 0xff0d),
    ("Pause", 0xff13),
    ("Scroll_Lock", 0xff14),
    ("Escape", 0xff1b),
    ("Home", 0xff50),
    ("Left", 0xff51),
    ("Up", 0xff52),
    ("Right", 0xff53),
    ("Down", 0xff54),
    ("Page_Up", 0xff55),
    ("Page_Down", 0xff56),
    ("End", 0xff57),
    ("Print", 0xff61),
    ("Insert", 0xff63),
    ("Menu", 0xff67),
    ("KP_Enter", 0xff8d),
    ("Shift_L", 0xffe1),
    ("Shift_R", 0xffe2),
    ("Control_L", 0xffe3),
    ("Control_R", 0xffe4),
    ("Caps_Lock", 0xffe5),
    ("Meta_L", 0xffe7),
    ("Meta_R", 0xffe8),
    ("Alt_L", 0xffe9),
    ("Alt_R", 0xffea),
    ("Super_L", 0xffeb),
    ("Super_R", 0xffec),
    ("Delete", 0xffff),
];

/// Short aliases accepted in chords and scripts.
const ALIASES: &[(&str, &str)] = &[
    ("ctrl", "Control_L"),
    ("control", "Control_L"),
    ("alt", "Alt_L"),
    ("shift", "Shift_L"),
    ("super", "Super_L"),
    ("win", "Super_L"),
    ("meta", "Meta_L"),
    ("enter", "Return"),
    ("esc", "Escape"),
];

impl Keysym {
    /// Parse an X keysym name (`w`, `W`, `Return`, `F5`, `Control_L`) or a chord alias (`ctrl`).
    pub fn from_name(name: &str) -> Result<Keysym, KeyError> {
        let lower = name.to_ascii_lowercase();
        if let Some((_, real)) = ALIASES.iter().find(|(a, _)| *a == lower) {
            return Keysym::from_name(real);
        }
        if let Some((_, v)) = NAMED
            .iter()
            .find(|(n, _)| *n == name || n.eq_ignore_ascii_case(name))
        {
            return Ok(Keysym(*v));
        }
        let mut chars = name.chars();
        if let (Some(c), None) = (chars.next(), chars.clone().next()) {
            if c.is_ascii_graphic() {
                return Ok(Keysym(c as u32));
            }
        }
        if let Some(n) = name.strip_prefix('F').or_else(|| name.strip_prefix('f')) {
            if let Ok(k) = n.parse::<u32>() {
                if (1..=35).contains(&k) {
                    return Ok(Keysym(0xffbe + k - 1));
                }
            }
        }
        Err(KeyError::UnknownKey(name.to_string()))
    }

    /// The keysym a printable ASCII character types (space included); `None` for others.
    pub fn from_char(c: char) -> Option<Keysym> {
        if c == ' ' || c.is_ascii_graphic() {
            Some(Keysym(c as u32))
        } else if c == '\n' {
            Some(Keysym(0xff0d))
        } else {
            None
        }
    }

    /// The canonical name (`w`, `Return`, `F5`), or a hex form for unnamed values.
    pub fn name(self) -> String {
        if let Some((n, _)) = NAMED.iter().find(|(_, v)| *v == self.0) {
            return (*n).to_string();
        }
        if (0xffbe..0xffbe + 35).contains(&self.0) {
            return format!("F{}", self.0 - 0xffbe + 1);
        }
        match char::from_u32(self.0) {
            Some(c) if c.is_ascii_graphic() => c.to_string(),
            _ => format!("0x{:x}", self.0),
        }
    }

    pub fn is_modifier(self) -> bool {
        (0xffe1..=0xffee).contains(&self.0)
    }
}

impl fmt::Display for Keysym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// A chord such as `ctrl+Pause`: keys pressed in order, released in reverse.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Chord(pub Vec<Keysym>);

impl Chord {
    pub fn parse(s: &str) -> Result<Chord, KeyError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(KeyError::EmptyChord);
        }
        // A lone "+" is the plus key; otherwise "+" separates.
        if s == "+" {
            return Ok(Chord(vec![Keysym('+' as u32)]));
        }
        let keys = s
            .split('+')
            .map(|p| Keysym::from_name(p.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Chord(keys))
    }
}

impl fmt::Display for Chord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.0.iter().map(|k| k.name()).collect();
        f.write_str(&names.join("+"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in [
            "w",
            "W",
            "Return",
            "Escape",
            "F5",
            "F12",
            "Control_L",
            "Pause",
            "space",
            "Left",
            "1",
        ] {
            let k = Keysym::from_name(n).unwrap();
            assert_eq!(k.name(), n, "{n}");
        }
        assert_eq!(Keysym::from_name("ctrl").unwrap(), Keysym(0xffe3));
        assert!(Keysym::from_name("Bogus").is_err());
    }

    #[test]
    fn chords_parse() {
        let c = Chord::parse("alt+F4").unwrap();
        assert_eq!(c.0, vec![Keysym(0xffe9), Keysym(0xffc1)]);
        assert_eq!(c.to_string(), "Alt_L+F4");
        assert!(Chord::parse("").is_err());
        assert!(Chord::parse("ctrl+nope").is_err());
    }
}
