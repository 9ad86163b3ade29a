//! Classroom mode: a link can hide panels (`hide=controls,curves`), as
//! TensorFlow Playground's hide keys do, and open the presenter's view
//! (`present=on`: large type for a projector, the settings folded away).
//! Both are the app's own link entries, read for every page.

use super::query::Entry;
use eframe::egui;

/// A part of the page a link may hide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Panel {
    /// the settings at the left (a one-line run bar stays: play, step, reset)
    Controls,
    /// the loss curves and the lab's plots below the views
    Curves,
    /// the playground's target view beside the model's
    Target,
    /// the bar at the top: the pages, the lessons' menu, the text size
    Pages,
}

/// Every panel, in the order a link lists them.
pub const PANELS: [Panel; 4] = [Panel::Controls, Panel::Curves, Panel::Target, Panel::Pages];

/// The text size of the presenter's view (egui's zoom factor).
pub const PRESENTER_ZOOM: f32 = 1.75;

/// The link entry that hides panels.
pub const HIDE_KEY: &str = "hide";
/// The link entry that opens the presenter's view.
pub const PRESENT_KEY: &str = "present";

impl Panel {
    /// Its name in a link.
    pub fn name(self) -> &'static str {
        match self {
            Panel::Controls => "controls",
            Panel::Curves => "curves",
            Panel::Target => "target",
            Panel::Pages => "pages",
        }
    }
}

/// What the page hides, and whether it presents.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Classroom {
    /// the panels hidden, in [`PANELS`] order, each once
    hidden: Vec<Panel>,
    /// the presenter's view: large type, the controls folded into the run bar
    pub presenting: bool,
}

impl Classroom {
    /// Whether the page shows `panel`. The presenter's view folds the
    /// controls away until "Controls" on the run bar opens them.
    pub fn shows(&self, panel: Panel) -> bool {
        !self.hidden.contains(&panel)
    }

    /// Hides `panel`, or shows it again.
    pub fn set_hidden(&mut self, panel: Panel, hidden: bool) {
        self.hidden.retain(|p| *p != panel);
        if hidden {
            self.hidden.push(panel);
            self.hidden.sort();
        }
    }

    /// Shows every panel and ends the presenter's view.
    pub fn show_all(&mut self) {
        *self = Self::default();
    }

    /// Starts or ends the presenter's view: on, the controls fold away;
    /// off, they come back.
    pub fn set_presenting(&mut self, on: bool) {
        self.presenting = on;
        self.set_hidden(Panel::Controls, on);
    }

    /// Uses `key=value` when it is one of classroom mode's entries; `None`
    /// when the key is not one of them. Unknown panel names are named and
    /// ignored; the known ones in the same entry are still hidden.
    pub fn apply(&mut self, key: &str, value: &str) -> Option<Entry> {
        match key {
            HIDE_KEY => {
                let mut unknown = Vec::new();
                for name in value.split(',').filter(|n| !n.is_empty()) {
                    match PANELS.iter().find(|p| p.name() == name) {
                        Some(&panel) => self.set_hidden(panel, true),
                        None => unknown.push(format!("'{name}'")),
                    }
                }
                Some(if unknown.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{} not a panel: the panels are {}",
                        unknown.join(", "),
                        PANELS.map(Panel::name).join(", ")
                    ))
                })
            }
            PRESENT_KEY => Some(match value {
                "on" => {
                    self.set_presenting(true);
                    Ok(())
                }
                "off" => Ok(()),
                _ => Err("on or off".into()),
            }),
            _ => None,
        }
    }

    /// Classroom mode as a link asks for it (its other entries are ignored here).
    pub fn from_query(query: &str) -> Self {
        let mut classroom = Self::default();
        for (_, key, value) in super::query::entries(query) {
            classroom.apply(key, value);
        }
        classroom
    }

    /// The entries for a link (empty when nothing is hidden).
    pub fn to_query(&self) -> String {
        let mut entries = String::new();
        if self.presenting {
            entries += &format!("&{PRESENT_KEY}=on");
        }
        // the presenter's view hides the controls by itself
        let hidden: Vec<&str> = self
            .hidden
            .iter()
            .filter(|p| !(self.presenting && **p == Panel::Controls))
            .map(|p| p.name())
            .collect();
        if !hidden.is_empty() {
            entries += &format!("&{HIDE_KEY}={}", hidden.join(","));
        }
        entries
    }
}

/// One of a page's panels, drawn by the page.
pub type PanelUi<P> = fn(&mut P, &mut egui::Ui);

/// A page's panels around its views, less what the classroom hides: the
/// settings at the left (or, hidden, the run bar at the top) and the curves
/// at the bottom. Both pages lay them out here.
pub fn side_panels_ui<P>(
    ui: &mut egui::Ui,
    classroom: &mut Classroom,
    page: &mut P,
    controls: PanelUi<P>,
    run_buttons: PanelUi<P>,
    curves: PanelUi<P>,
) {
    if classroom.shows(Panel::Controls) {
        egui::Panel::left("controls")
            .resizable(false)
            .default_size(260.0)
            .show(ui, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| controls(page, ui));
            });
    } else {
        run_bar_ui(ui, classroom, |ui| run_buttons(page, ui));
    }
    if classroom.shows(Panel::Curves) {
        egui::Panel::bottom("loss")
            .default_size(150.0)
            .show(ui, |ui| curves(page, ui));
    }
}

/// The one-line bar that stands in for hidden controls: the page's run
/// buttons, and "Controls" to show the settings again.
pub fn run_bar_ui(
    ui: &mut egui::Ui,
    classroom: &mut Classroom,
    buttons: impl FnOnce(&mut egui::Ui),
) {
    egui::Panel::top("run bar").show(ui, |ui| {
        ui.horizontal_wrapped(|ui| {
            buttons(ui);
            ui.separator();
            if ui
                .button("Controls")
                .on_hover_text("Shows the settings again (Esc shows every panel).")
                .clicked()
            {
                classroom.set_hidden(Panel::Controls, false);
            }
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hide_keys_hide_what_they_name_and_name_what_they_do_not_know() {
        let c = Classroom::from_query("?target=rings&hide=controls,curves");
        assert!(!c.shows(Panel::Controls) && !c.shows(Panel::Curves));
        assert!(c.shows(Panel::Target) && c.shows(Panel::Pages));
        assert!(!c.presenting);
        assert_eq!(c.to_query(), "&hide=controls,curves");

        let mut d = Classroom::default();
        assert_eq!(
            d.apply("hide", "target,banana,,axes"),
            Some(Err("'banana', 'axes' not a panel: the panels are \
                 controls, curves, target, pages"
                .into()))
        );
        assert!(!d.shows(Panel::Target), "the known name is still used");
        assert_eq!(d.apply("present", "maybe"), Some(Err("on or off".into())));
        assert_eq!(d.apply("seed", "1"), None);
    }

    #[test]
    fn the_presenter_view_folds_the_controls_and_travels_in_the_link() {
        let c = Classroom::from_query("present=on&hide=target");
        assert!(c.presenting && !c.shows(Panel::Controls) && !c.shows(Panel::Target));
        assert_eq!(c.to_query(), "&present=on&hide=target");
        assert_eq!(Classroom::from_query(&c.to_query()), c);
        let mut c = c;
        c.set_presenting(false);
        assert!(c.shows(Panel::Controls) && !c.shows(Panel::Target));
        c.show_all();
        assert_eq!(c, Classroom::default());
        assert_eq!(c.to_query(), "");
    }
}
