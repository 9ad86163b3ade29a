//! Pictures and pieces both pages draw: colour maps and the colour bar
//! ([`colour`]), small plots of curves and histograms ([`plots`]),
//! messages ([`notes`]), and the layer-by-layer control ([`scrubber`]).

pub mod colour;
pub mod notes;
pub mod plots;
pub mod scrubber;
