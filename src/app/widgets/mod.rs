//! Pictures and pieces both pages draw: colour maps and the colour bar
//! ([`colour`]), small plots of curves and histograms ([`plots`]), and
//! messages ([`notes`]).

pub mod colour;
pub mod notes;
pub mod plots;
