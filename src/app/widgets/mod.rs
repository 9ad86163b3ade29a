//! Pictures both pages draw: colour maps and the colour bar ([`colour`]),
//! and small plots of curves and histograms ([`plots`]).

pub mod colour;
pub mod plots;
