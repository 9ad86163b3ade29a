//! An image as a 2D density (the "Face" idea of Neural Spline Flows): a
//! grey-scale image, pixels drawn with probability proportional to their
//! intensity and jittered within the pixel, placed on the plot square.

use super::TargetError;
use crate::rng::Rng;

/// Half-width of the square the image's longer side spans.
const EXTENT: f64 = 3.5;

/// Images are scaled down to at most this many pixels a side.
const MAX_SIDE: u32 = 512;

/// An image's size and grey levels in [0, 1], row-major from the top-left.
fn decode_grey(bytes: &[u8]) -> Result<(usize, usize, Vec<f64>), TargetError> {
    let img = image::load_from_memory(bytes).map_err(|e| TargetError::NotAnImage(e.to_string()))?;
    // a density needs no more detail than this (a photo would cost memory)
    let img = if img.width().max(img.height()) > MAX_SIDE {
        img.thumbnail(MAX_SIDE, MAX_SIDE)
    } else {
        img
    };
    let grey = img.to_luma8();
    let (w, h) = (grey.width() as usize, grey.height() as usize);
    let values = grey.pixels().map(|p| p.0[0] as f64 / 255.0).collect();
    Ok((w, h, values))
}

#[derive(Clone, Debug)]
pub struct ImageDensity {
    width: usize,
    height: usize,
    /// cumulative pixel probabilities, row-major from the top-left
    cdf: Vec<f64>,
    /// data-space size of one pixel
    pixel: f64,
}

impl ImageDensity {
    /// Decodes PNG or JPEG bytes. `invert` uses darkness instead of brightness
    /// (for drawings in black on white).
    pub fn from_bytes(bytes: &[u8], invert: bool) -> Result<Self, TargetError> {
        let (w, h, grey) = decode_grey(bytes)?;
        let weights: Vec<f64> = grey
            .iter()
            .map(|&v| if invert { 1.0 - v } else { v })
            .collect();
        Self::from_weights(w, h, &weights)
    }

    /// Decodes PNG or JPEG bytes, taking the ink to be whatever is rarer:
    /// darkness on a mostly light image (a drawing, a logo), else brightness.
    /// Also says whether it inverted.
    pub fn from_bytes_auto(bytes: &[u8]) -> Result<(Self, bool), TargetError> {
        let (_, _, grey) = decode_grey(bytes)?;
        let mean = grey.iter().sum::<f64>() / grey.len().max(1) as f64;
        let invert = mean > 0.5;
        Ok((Self::from_bytes(bytes, invert)?, invert))
    }

    /// A density from non-negative pixel weights (row-major, top row first).
    pub fn from_weights(width: usize, height: usize, weights: &[f64]) -> Result<Self, TargetError> {
        if width == 0 || height == 0 || weights.len() != width * height {
            return Err(TargetError::EmptyImage);
        }
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err(TargetError::BadWeights);
        }
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Err(TargetError::NoMass);
        }
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Ok(Self {
            width,
            height,
            cdf,
            pixel: 2.0 * EXTENT / width.max(height) as f64,
        })
    }

    /// Its width, height and cumulative pixel probabilities: what
    /// [`Self::from_parts`] rebuilds it from exactly.
    pub fn parts(&self) -> (usize, usize, &[f64]) {
        (self.width, self.height, &self.cdf)
    }

    /// The density [`Self::parts`] describes; the cumulative probabilities
    /// must rise from above 0 to 1.
    pub fn from_parts(width: usize, height: usize, cdf: Vec<f64>) -> Result<Self, TargetError> {
        if width == 0 || height == 0 || cdf.len() != width * height {
            return Err(TargetError::EmptyImage);
        }
        let rising = cdf.windows(2).all(|w| w[0] <= w[1]);
        let ends = cdf.first().is_some_and(|&c| c >= 0.0)
            && cdf.last().is_some_and(|&c| (c - 1.0).abs() < 1e-9);
        if !rising || !ends || cdf.iter().any(|c| !c.is_finite()) {
            return Err(TargetError::BadWeights);
        }
        Ok(Self {
            width,
            height,
            cdf,
            pixel: 2.0 * EXTENT / width.max(height) as f64,
        })
    }

    fn origin(&self) -> (f64, f64) {
        // top-left corner, centred on the origin
        (
            -0.5 * self.width as f64 * self.pixel,
            0.5 * self.height as f64 * self.pixel,
        )
    }

    pub fn sample(&self, rng: &mut Rng) -> [f64; 2] {
        let u = rng.uniform();
        let idx = self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1);
        let (col, row) = (idx % self.width, idx / self.width);
        let (x0, y0) = self.origin();
        [
            x0 + (col as f64 + rng.uniform()) * self.pixel,
            y0 - (row as f64 + rng.uniform()) * self.pixel,
        ]
    }

    pub fn log_density(&self, x: &[f64]) -> f64 {
        let (x0, y0) = self.origin();
        let col = ((x[0] - x0) / self.pixel).floor();
        let row = ((y0 - x[1]) / self.pixel).floor();
        if col < 0.0 || row < 0.0 || col >= self.width as f64 || row >= self.height as f64 {
            return f64::NEG_INFINITY;
        }
        let idx = row as usize * self.width + col as usize;
        let p = self.cdf[idx] - if idx > 0 { self.cdf[idx - 1] } else { 0.0 };
        (p / (self.pixel * self.pixel)).ln()
    }
}
