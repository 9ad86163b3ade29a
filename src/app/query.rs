//! Reading a page's settings from its URL query: each `key=value` entry is
//! used when it is valid, and the rest are named, so a malformed link still
//! opens a working page and says what it ignored.

/// Hands each `key=value` entry of a URL query to `apply`, which uses it and
/// says whether it was valid; returns the entries that were not.
pub fn apply_query(query: &str, mut apply: impl FnMut(&str, &str) -> bool) -> Vec<String> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            !apply(key, value)
        })
        .map(str::to_string)
        .collect()
}

/// Stores `value` when `valid`; says whether it was.
pub fn set_if<T>(slot: &mut T, value: T, valid: bool) -> bool {
    if valid {
        *slot = value;
    }
    valid
}

/// Stores `value` parsed when it lies in `range`; says whether it did.
pub fn parse_in<T: std::str::FromStr + PartialOrd>(
    slot: &mut T,
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> bool {
    match value.parse::<T>() {
        Ok(v) if range.contains(&v) => {
            *slot = v;
            true
        }
        _ => false,
    }
}

/// Stores the entry of `choices` whose name is `value`; says whether there was one.
pub fn pick<T: Copy>(slot: &mut T, value: &str, choices: &[T], name: impl Fn(&T) -> &str) -> bool {
    match choices.iter().find(|c| name(c) == value) {
        Some(&c) => {
            *slot = c;
            true
        }
        None => false,
    }
}

/// The sentence a page shows about the entries of its link it ignored.
pub fn ignored_note(ignored: &[String]) -> Option<String> {
    (!ignored.is_empty()).then(|| {
        format!(
            "The link's {} was not understood and was ignored.",
            ignored.join(", ")
        )
    })
}
