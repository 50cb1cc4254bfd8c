//! Category axes: one band per name, labelled in its middle.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;

/// Names laid out one per unit band of an `f64` axis.
pub struct Bands {
    names: Vec<String>,
    /// The first name at the axis's far end: top of a vertical axis, so a
    /// list reads top to bottom.
    downwards: bool,
}

/// The share of a band its bars leave empty on each side.
const GAP: f64 = 0.12;

impl Bands {
    /// For a vertical axis: the first name on top.
    pub fn down(names: Vec<String>) -> Bands {
        Bands {
            names,
            downwards: true,
        }
    }

    /// For a horizontal axis: the first name on the left.
    pub fn across(names: Vec<String>) -> Bands {
        Bands {
            names,
            downwards: false,
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// The axis, with a key point (label and tick) in the middle of each band.
    pub fn coord(&self) -> BandAxis {
        let n = self.len();
        BandAxis {
            linear: (0.0..n.max(1) as f64).into(),
            bands: n,
        }
    }

    /// The label of the band holding `value`.
    pub fn label(&self, value: f64) -> String {
        let band = value.floor() as usize;
        let index = if self.downwards {
            self.len().checked_sub(band + 1)
        } else {
            Some(band)
        };
        index
            .and_then(|i| self.names.get(i))
            .cloned()
            .unwrap_or_default()
    }

    /// Where the `index`th name's band starts.
    fn start(&self, index: usize) -> f64 {
        if self.downwards {
            (self.len() - 1 - index) as f64
        } else {
            index as f64
        }
    }

    /// The middle of the `index`th name's band.
    pub fn middle(&self, index: usize) -> f64 {
        self.start(index) + 0.5
    }

    /// The extent of bar `series` of `count` side by side in band `index`;
    /// with `downwards` the first series is on top.
    pub fn bar(&self, index: usize, series: usize, count: usize) -> (f64, f64) {
        let width = (1.0 - 2.0 * GAP) / count.max(1) as f64;
        let slot = if self.downwards {
            count - 1 - series
        } else {
            series
        };
        let low = self.start(index) + GAP + width * slot as f64;
        (low, low + width)
    }
}

/// `0..n` as `f64`, ticked and labelled only in the middle of each band.
/// (plotters' own key-point wrapper keeps `f64`'s number formatting, which
/// takes no label formatter.)
pub struct BandAxis {
    linear: RangedCoordf64,
    bands: usize,
}

impl Ranged for BandAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: no light grid lines between the bands.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            (0..self.bands).map(|i| i as f64 + 0.5).collect()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downward_axis_reads_its_names_from_the_top() {
        let bands = Bands::down(vec!["a".into(), "b".into(), "c".into()]);
        assert_eq!(bands.label(2.5), "a", "the top band");
        assert_eq!(bands.label(0.5), "c");
        assert_eq!(bands.label(3.5), "", "past the last band");
        let (low, high) = bands.bar(0, 0, 2);
        assert!((2.5..3.0).contains(&low) && high < 3.0, "{low}..{high}");
    }

    #[test]
    fn an_across_axis_reads_its_names_from_the_left() {
        let bands = Bands::across(vec!["ok".into(), "crash".into()]);
        assert_eq!(bands.label(0.2), "ok");
        assert_eq!(bands.middle(1), 1.5);
        let (low, high) = bands.bar(1, 1, 2);
        assert!(
            low >= 1.5 && high < 2.0,
            "the second bar in the right half: {low}..{high}"
        );
    }
}
