//! The form of the settings that say how many transfers of one object run
//! at once: segments a GET reads (`--prefetch`, see `prefetch_depth`) and
//! connections a PUT body is written over (`--put-parallel`, see
//! `put_lanes`). Either a fixed number or `auto`, which each adapts in its
//! own way.

/// A fixed count from 1 to 64, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FanOut {
    /// Always this many (1: one at a time).
    Fixed(usize),
    /// Adapted per object to what pays.
    Auto,
}

impl std::str::FromStr for FanOut {
    type Err = String;

    /// `auto`, or a number from 1 to 64.
    fn from_str(s: &str) -> Result<FanOut, String> {
        match s.trim() {
            "auto" => Ok(FanOut::Auto),
            n => match n.parse::<usize>() {
                Ok(w @ 1..=64) => Ok(FanOut::Fixed(w)),
                _ => Err(format!("{s:?}: want auto or a number from 1 to 64")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FanOut;

    #[test]
    fn the_setting_parses() {
        assert_eq!("auto".parse(), Ok(FanOut::Auto));
        assert_eq!(" 4 ".parse(), Ok(FanOut::Fixed(4)));
        assert_eq!("64".parse(), Ok(FanOut::Fixed(64)));
        assert!("0".parse::<FanOut>().is_err() && "65".parse::<FanOut>().is_err());
        assert!("x".parse::<FanOut>().is_err() && "".parse::<FanOut>().is_err());
    }
}
