//! Reading a page's settings from its URL query: each `key=value` entry is
//! used when it is valid, and the rest are named, so a malformed link still
//! opens a working page and says what it ignored.

use super::classroom::Classroom;
use eframe::egui;
use std::fmt::Display;

/// What a page makes of one entry of its link: used, or why not.
pub type Entry = Result<(), String>;

/// The `(entry, key, value)` of each `key=value` entry of a URL query.
pub fn entries(query: &str) -> impl Iterator<Item = (&str, &str, &str)> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (pair, key, value)
        })
}

/// Hands each `key=value` entry of a URL query to `apply`, which uses it or
/// says why not; returns the entries it did not use, each with the reason
/// (`lr=1 (out of range: 0.0001 to 0.1)`). The app's own entries (the
/// [`Appearance`] and the [`Classroom`]) are checked here, for every page,
/// and not handed on.
pub fn apply_query(query: &str, mut apply: impl FnMut(&str, &str) -> Entry) -> Vec<String> {
    entries(query)
        .filter(|(_, key, _)| {
            ![LESSON_KEY, COMPARE_KEY, GPU_KEY, WORKER_KEY, WORKERS_KEY].contains(key)
        })
        .filter_map(|(pair, key, value)| {
            let entry = Appearance::default()
                .apply(key, value)
                .or_else(|| Classroom::default().apply(key, value))
                .unwrap_or_else(|| apply(key, value));
            entry.err().map(|why| format!("{pair} ({why})"))
        })
        .collect()
}

/// The link entry that opens a lesson (`lesson=radial-rings`): the app's,
/// read by [`lesson_in`], never handed to a page.
pub const LESSON_KEY: &str = "lesson";

/// The lesson a link names, if it names one.
pub fn lesson_in(query: &str) -> Option<&str> {
    value_in(query, LESSON_KEY)
}

/// The link entry that opens the playground's side-by-side comparison on a
/// preset (`compare=families`): read by [`compare_in`], never handed to a
/// page's settings.
pub const COMPARE_KEY: &str = "compare";

/// The comparison preset a link names, if it names one.
pub fn compare_in(query: &str) -> Option<&str> {
    value_in(query, COMPARE_KEY)
}

/// The link entry that chooses where the playground trains (`gpu=on`, even on
/// an emulated GPU; `gpu=off`, the CPU): read by [`gpu_in`].
pub const GPU_KEY: &str = "gpu";

/// The device a link chooses: `Some(Ok(true))` for the GPU, `Some(Ok(false))`
/// for the CPU, `Some(Err(why))` for a value that is neither.
pub fn gpu_in(query: &str) -> Option<Result<bool, String>> {
    switch_in(query, GPU_KEY)
}

/// The link entry that keeps CPU training on the page's own thread
/// (`worker=off`; `worker=on`, the default in a browser): read by [`worker_in`].
pub const WORKER_KEY: &str = "worker";

/// Whether a link wants CPU runs in a worker: `Some(Ok(wanted))`, or
/// `Some(Err(why))` for a value that is neither on nor off.
pub fn worker_in(query: &str) -> Option<Result<bool, String>> {
    switch_in(query, WORKER_KEY)
}

/// The link entry that splits each CPU training step over several workers
/// (`workers=3`: the worker and two helpers): read by [`workers_in`].
pub const WORKERS_KEY: &str = "workers";

/// How many workers a link splits each step over: `Some(Ok(n))`, or
/// `Some(Err(why))` for a value that is not a whole number from 1 to
/// [`MAX_WORKERS`](crate::app::host::worker::MAX_WORKERS).
pub fn workers_in(query: &str) -> Option<Result<usize, String>> {
    let most = crate::app::host::worker::MAX_WORKERS;
    value_in(query, WORKERS_KEY).map(|value| match value.parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(format!(
            "{WORKERS_KEY}={value} is not a number of workers from 1 to {most}"
        )),
    })
}

/// An on/off entry of the link named `key`: `Some(Ok(on))`, or
/// `Some(Err(why))` for a value that is neither.
fn switch_in(query: &str, key: &str) -> Option<Result<bool, String>> {
    value_in(query, key).map(|value| match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{key}={other} is neither on nor off")),
    })
}

/// The value of the link's first entry named `name`.
fn value_in<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    entries(query)
        .find(|(_, key, _)| *key == name)
        .map(|(_, _, value)| value)
}

/// The app's own entries, which every page's link may carry: the theme and
/// the text size.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Appearance {
    pub theme: Option<egui::ThemePreference>,
    /// the zoom factor, within [`ZOOMS`]
    pub zoom: Option<f32>,
}

/// The themes a link may ask for.
const THEMES: [egui::ThemePreference; 3] = [
    egui::ThemePreference::Dark,
    egui::ThemePreference::Light,
    egui::ThemePreference::System,
];

/// A theme's name in a link.
fn theme_name(theme: egui::ThemePreference) -> &'static str {
    match theme {
        egui::ThemePreference::Dark => "dark",
        egui::ThemePreference::Light => "light",
        egui::ThemePreference::System => "system",
    }
}

/// The text sizes the page offers (egui's zoom factor).
pub const ZOOMS: std::ops::RangeInclusive<f32> = 0.75..=2.5;

impl Appearance {
    /// Uses `key=value` when it is one of the app's entries; `None` when the
    /// key is not the app's (the page's settings take it).
    pub fn apply(&mut self, key: &str, value: &str) -> Option<Entry> {
        match key {
            "theme" => {
                let mut theme = egui::ThemePreference::System;
                let entry = pick(&mut theme, value, &THEMES, |t| theme_name(*t));
                if entry.is_ok() {
                    self.theme = Some(theme);
                }
                Some(entry)
            }
            "zoom" => {
                let mut zoom = 1.0;
                let entry = parse_in(&mut zoom, value, ZOOMS);
                if entry.is_ok() {
                    self.zoom = Some(zoom);
                }
                Some(entry)
            }
            _ => None,
        }
    }

    /// The appearance a link asks for (its other entries are ignored here).
    pub fn from_query(query: &str) -> Self {
        let mut appearance = Self::default();
        for (_, key, value) in entries(query) {
            appearance.apply(key, value);
        }
        appearance
    }

    /// The appearance the page has now.
    pub fn of(ctx: &egui::Context) -> Self {
        Self {
            theme: Some(ctx.options(|o| o.theme_preference)),
            zoom: Some(ctx.zoom_factor()),
        }
    }

    /// The entries for a link (empty for the defaults: the system's theme, 100%).
    pub fn to_query(&self) -> String {
        let mut entries = Vec::new();
        if let Some(theme) = self.theme.filter(|t| *t != egui::ThemePreference::System) {
            entries.push(format!("theme={}", theme_name(theme)));
        }
        if let Some(zoom) = self.zoom.filter(|z| (z - 1.0).abs() > 1e-3) {
            entries.push(format!("zoom={zoom}"));
        }
        entries.iter().map(|e| format!("&{e}")).collect()
    }
}

/// The reason for a key the page does not know.
pub fn unknown() -> Entry {
    Err("not a setting".into())
}

/// Stores `value` when `valid`, else names the values that are.
pub fn set_if<T>(slot: &mut T, value: T, valid: bool, expected: &str) -> Entry {
    if !valid {
        return Err(format!("expected {expected}"));
    }
    *slot = value;
    Ok(())
}

/// Stores `value` parsed when it lies in `range`, else says why not.
pub fn parse_in<T: std::str::FromStr + PartialOrd + Display>(
    slot: &mut T,
    value: &str,
    range: std::ops::RangeInclusive<T>,
) -> Entry {
    match value.parse::<T>() {
        Ok(v) if range.contains(&v) => {
            *slot = v;
            Ok(())
        }
        // NaN parses, and is no number a setting can take
        Ok(v) if v.partial_cmp(&v).is_none() => Err("not a number".into()),
        Ok(_) => Err(format!(
            "out of range: {} to {}",
            range.start(),
            range.end()
        )),
        Err(_) => Err("not a number".into()),
    }
}

/// Stores the entry of `choices` whose name is `value`, else names the choices.
pub fn pick<T: Copy>(slot: &mut T, value: &str, choices: &[T], name: impl Fn(&T) -> &str) -> Entry {
    match choices.iter().find(|c| name(c) == value) {
        Some(&c) => {
            *slot = c;
            Ok(())
        }
        None => Err(format!(
            "one of {}",
            choices.iter().map(&name).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The sentence a page shows about the entries of its link it ignored.
pub fn ignored_note(ignored: &[String]) -> Option<String> {
    let verb = if ignored.len() == 1 { "was" } else { "were" };
    (!ignored.is_empty()).then(|| {
        format!(
            "The link's {} {verb} ignored; the defaults are used instead.",
            ignored.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_appearance_travels_in_the_link() {
        let a = Appearance {
            theme: Some(egui::ThemePreference::Light),
            zoom: Some(1.5),
        };
        assert_eq!(a.to_query(), "&theme=light&zoom=1.5");
        assert_eq!(
            Appearance::from_query(&format!("?target=rings{}", a.to_query())),
            a
        );
        let mut b = Appearance::default();
        assert_eq!(
            b.apply("zoom", "9"),
            Some(Err("out of range: 0.75 to 2.5".into()))
        );
        assert_eq!(
            b.apply("theme", "pink"),
            Some(Err("one of dark, light, system".into()))
        );
        assert_eq!(b.apply("seed", "1"), None);
        assert_eq!(b, Appearance::default());
    }
}
