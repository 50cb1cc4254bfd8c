//! The sizes of a case other than the public one (a held-out case, or the
//! inputs a grade times): a preset's symbols with every size that may vary
//! scaled by 0.85–1.15, as the native corpus draws its held-out sizes,
//! within what the manifest declares and its presets show.
//!
//! A symbol varies when it is a size as HPCAgent-Bench's own fuzzing tells
//! one: an integer above 1 in every preset whose value changes from preset
//! to preset (one declared alike in every preset is a knob: an iteration
//! cap, a tile, a seed), that is not a config knob and that the manifest's
//! `fuzzed` preset does not pin (a value, a `{set: …}`, a `{construct: …}`).
//! A `fuzzed` range bounds a symbol whose preset value lies in it; a
//! `{derive: expr}` entry, and a constraint `SYM == expr`, compute their
//! symbol from the drawn ones. Sizes equal at the preset are drawn as one
//! (many manifests' shapes name one symbol for another that equals it
//! there), and a size a fixed symbol divides at every preset stays its
//! multiple (a group count, a stride). A draw is kept only when every constraint
//! (`constraints`, `fuzz.constraints`) holds, every array's dimensions stay
//! at least 1 (where the preset's are), and the case takes at most half as
//! many bytes again as the preset's. A case's plan carries up to [`DRAWS`]
//! draws; what the presets do not show (a literal extent in a shape that
//! fits the preset's sizes alone) the initializer or the reference
//! refuses, and the judge's Python takes the next.

use std::collections::BTreeMap;

use serde_norway::{Mapping, Value};

use super::pyexpr::{self, Value as PyValue};
use super::{HabError, Kernel, PRESETS};

/// The factors a varying size is scaled by: the native corpus's.
pub const FUZZ: (f64, f64) = (0.85, 1.15);

/// Draws of a case's sizes tried, for at most [`DRAWS`] of them.
pub const TRIES: usize = 32;

/// Draws a case's plan carries: the judge's Python makes the case at the
/// first its initializer and reference take.
pub const DRAWS: usize = 3;

/// How much larger than its preset's a case may be, in bytes.
const MOST_BYTES: f64 = 1.5;

/// How a size symbol of a case is set.
#[derive(Debug, Clone, PartialEq)]
enum Rule {
    /// Scaled by [`FUZZ`], then kept within `[lo, hi]` (a `fuzzed` range)
    /// when the preset's value is.
    Varies(Option<(i64, i64)>),
    /// Computed from the other symbols by a Python expression.
    Derived(String),
}

impl Kernel {
    /// Symbols to make a case at, drawn from `preset`'s
    /// ([`Self::preset_symbols`]), best first: up to [`DRAWS`] distinct
    /// ones, each with every size that may vary scaled by a factor from
    /// `unit` (uniform in [0, 1)), keeping what the preset's sizes show of
    /// their relations (sizes equal there are drawn as one; a size a fixed
    /// symbol divides stays its multiple), under the manifest's
    /// constraints, none equal to `unlike` (the public case's symbols).
    /// Empty where no size can vary. A relation the manifest does not show
    /// (a literal extent in a shape that only fits the preset's sizes) can
    /// still make the initializer or the reference refuse a draw: the
    /// judge's Python then makes the case at the next one.
    pub fn size_draws(
        &self,
        preset: &str,
        unlike: Option<&Mapping>,
        unit: &mut dyn FnMut() -> f64,
    ) -> Result<Vec<Mapping>, HabError> {
        let base = self.preset_symbols(preset)?;
        let rules = self.size_rules();
        let relations = self.relations(&base, &rules);
        let limit = self
            .bytes_at(&base)
            .ok()
            .map(|bytes| (bytes as f64 * MOST_BYTES) as u64);
        let mut draws: Vec<Mapping> = Vec::new();
        let keep = |drawn: Mapping, draws: &mut Vec<Mapping>| {
            let fresh = unlike != Some(&drawn) && drawn != base && !draws.contains(&drawn);
            if fresh && self.admits(&drawn, &base, limit, &rules) {
                draws.push(drawn);
            }
        };
        for _ in 0..TRIES {
            if draws.len() == DRAWS {
                return Ok(draws);
            }
            let mut drawn = base.clone();
            for (name, rule) in &rules {
                if let Rule::Varies(bounds) = rule {
                    let value = int_of(&base, name).expect("a varying size is an integer");
                    let factor = FUZZ.0 + (FUZZ.1 - FUZZ.0) * unit();
                    // A size is above 1 in every preset: it stays so.
                    let mut fuzzed = ((value as f64 * factor).round() as i64).max(2);
                    // A range bounds the sizes of the presets it holds
                    // (a `fuzzed` range is often drawn around XL alone).
                    if let Some((lo, hi)) = bounds
                        && (*lo..=*hi).contains(&value)
                    {
                        fuzzed = fuzzed.clamp(*lo, *hi);
                    }
                    set_int(&mut drawn, name, fuzzed);
                }
            }
            relations.apply(&mut drawn);
            if self.derive(&mut drawn, &rules) {
                keep(drawn, &mut draws);
            }
        }
        // Sizes too small for a factor to move (2 × 1.15 rounds to 2): one
        // size (with those equal to it) one up or down.
        for (name, rule) in &rules {
            if draws.len() == DRAWS || !matches!(rule, Rule::Varies(_)) {
                continue;
            }
            let value = int_of(&base, name).expect("a varying size is an integer");
            for moved in [value + 1, value - 1] {
                let mut drawn = base.clone();
                set_int(&mut drawn, name, moved.max(2));
                relations.apply(&mut drawn);
                if self.derive(&mut drawn, &rules) {
                    keep(drawn, &mut draws);
                }
            }
        }
        Ok(draws)
    }

    /// The relations among the sizes `rules` draws: for each, in increasing
    /// order of its value at `base`, an earlier one equal to it there, or
    /// the fixed symbols that divide it at every preset (a divisor at one
    /// preset alone is as likely a coincidence: 200 iterations of a
    /// 200-wide grid).
    fn relations(&self, base: &Mapping, rules: &[(String, Rule)]) -> Relations {
        let mut varying: Vec<(String, i64)> = rules
            .iter()
            .filter(|(_, rule)| matches!(rule, Rule::Varies(_)))
            .filter_map(|(name, _)| Some((name.clone(), int_of(base, name)?)))
            .collect();
        varying.sort_by_key(|(name, value)| (*value, name.clone()));
        let fixed: Vec<(&str, i64)> = base
            .keys()
            .filter_map(Value::as_str)
            .filter(|name| !varying.iter().any(|(v, _)| v == name))
            .filter_map(|name| Some((name, int_of(base, name)?)))
            .filter(|(_, value)| *value >= 2)
            .collect();
        let presets: Vec<Mapping> = PRESETS
            .iter()
            .filter_map(|p| self.preset_symbols(p).ok())
            .collect();
        let divides = |fixed: &str, name: &str| {
            presets
                .iter()
                .all(|p| match (int_of(p, fixed), int_of(p, name)) {
                    (Some(f), Some(v)) => f >= 2 && v % f == 0,
                    _ => false,
                })
        };
        let mut order = Vec::new();
        for (i, (name, value)) in varying.iter().enumerate() {
            let equal = varying[..i]
                .iter()
                .find(|(_, earlier)| earlier == value)
                .map(|(earlier, _)| earlier.clone());
            let step = fixed
                .iter()
                .filter(|(f, _)| divides(f, name))
                .fold(1, |step, (_, f)| lcm(step, *f));
            order.push((name.clone(), equal, step));
        }
        Relations { order }
    }

    /// The symbols a case's sizes may differ in, and how each is set, in
    /// the order they are set (drawn ones, then derived ones).
    fn size_rules(&self) -> Vec<(String, Rule)> {
        let m = &self.manifest;
        let fuzzed = m.parameters.get("fuzzed");
        let spec = |name: &str| fuzzed.and_then(|f| f.get(name));
        let knobs: Vec<String> = match &m.config {
            Some(Value::Mapping(knobs)) => knobs
                .keys()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect(),
            Some(Value::Sequence(rows)) => rows
                .iter()
                .filter_map(Value::as_mapping)
                .flat_map(|row| row.keys().filter_map(|k| k.as_str().map(str::to_string)))
                .collect(),
            _ => Vec::new(),
        };
        let mut derived: Vec<(String, Rule)> = Vec::new();
        for name in self.symbol_names() {
            if let Some(Value::Mapping(entry)) = spec(&name)
                && let Some(expr) = entry.get("derive").and_then(Value::as_str)
            {
                derived.push((name.clone(), Rule::Derived(expr.to_string())));
            }
        }
        for constraint in self.constraints() {
            if let Some((left, right)) = constraint.split_once("==")
                && !right.contains("==")
                && !constraint.contains(" or ")
                && !constraint.contains(" and ")
            {
                let (left, right) = (left.trim(), right.trim());
                let named = self.symbol_names().any(|n| n == left);
                if named && !derived.iter().any(|(n, _)| n == left) {
                    derived.push((left.to_string(), Rule::Derived(right.to_string())));
                }
            }
        }
        let mut rules: Vec<(String, Rule)> = self
            .symbol_names()
            .filter(|name| !knobs.contains(name) && !derived.iter().any(|(n, _)| n == name))
            .filter(|name| self.varies(name))
            .filter_map(|name| {
                let bounds = match spec(&name) {
                    None => None,
                    Some(Value::Sequence(range)) => match range.as_slice() {
                        [lo, hi] => Some((lo.as_f64()?.ceil() as i64, hi.as_f64()?.floor() as i64)),
                        _ => return None,
                    },
                    // A value, a set or a construction: not drawn here.
                    Some(_) => return None,
                };
                Some((name, Rule::Varies(bounds)))
            })
            .collect();
        rules.extend(derived);
        rules
    }

    /// The names of the presets' symbols, as the first preset lists them.
    fn symbol_names(&self) -> impl Iterator<Item = String> + '_ {
        PRESETS
            .iter()
            .find_map(|p| self.manifest.parameters.get(*p))
            .into_iter()
            .flat_map(Mapping::keys)
            .filter_map(|k| k.as_str().map(str::to_string))
    }

    /// Whether `name` is a size: an integer above 1 in every preset, not
    /// the same in all of them.
    fn varies(&self, name: &str) -> bool {
        let values: Vec<Option<i64>> = PRESETS
            .iter()
            .filter_map(|p| self.manifest.parameters.get(*p))
            .map(|preset| int_of(preset, name))
            .collect();
        values.iter().all(|v| v.is_some_and(|v| v > 1))
            && values.windows(2).any(|pair| pair[0] != pair[1])
    }

    /// The manifest's constraints on its symbols: `constraints` and
    /// `fuzz.constraints`.
    fn constraints(&self) -> Vec<String> {
        let m = &self.manifest;
        let fuzz = m
            .fuzz
            .as_ref()
            .and_then(|f| f.get("constraints"))
            .into_iter();
        m.constraints
            .iter()
            .chain(fuzz)
            .flat_map(|c| match c {
                Value::Sequence(items) => items.clone(),
                one => vec![one.clone()],
            })
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect()
    }

    /// Sets each derived symbol of `symbols` from the others; `false` when
    /// one has no integer value.
    fn derive(&self, symbols: &mut Mapping, rules: &[(String, Rule)]) -> bool {
        for (name, rule) in rules {
            if let Rule::Derived(expr) = rule {
                match pyexpr::eval(expr, &self.values(symbols)) {
                    Ok(PyValue::Int(v)) => set_int(symbols, name, v),
                    _ => return false,
                }
            }
        }
        true
    }

    /// Whether a case binding `symbols` is one to make: every constraint
    /// holds, every array's dimensions are at least 1 where `base`'s are,
    /// and its bytes (where known) are within `limit`.
    fn admits(
        &self,
        symbols: &Mapping,
        base: &Mapping,
        limit: Option<u64>,
        rules: &[(String, Rule)],
    ) -> bool {
        let values = self.values(symbols);
        let holds = self
            .constraints()
            .iter()
            .all(|c| pyexpr::eval(c, &values).is_ok_and(PyValue::truth));
        if !holds || rules.is_empty() {
            return holds;
        }
        let Ok(pointers) = self.pointer_shapes() else {
            return false;
        };
        let (sizes, base_sizes) = (self.integers(symbols), self.integers(base));
        let shapes_hold = pointers.iter().all(|(_, shape)| {
            match (
                super::inputs::dims(shape, &sizes),
                super::inputs::dims(shape, &base_sizes),
            ) {
                (Ok(dims), Ok(base_dims)) => {
                    dims.iter().zip(&base_dims).all(|(d, b)| *d >= (*b).min(1))
                }
                // A shape an initializer decides (a sparse matrix's nnz).
                (Err(_), Err(_)) => true,
                _ => false,
            }
        });
        shapes_hold
            && match (limit, self.bytes_at(symbols)) {
                (Some(limit), Ok(bytes)) => bytes <= limit,
                _ => true,
            }
    }

    /// `symbols`, the initializer's scalars and constants as a constraint
    /// sees them.
    fn values(&self, symbols: &Mapping) -> BTreeMap<String, PyValue> {
        let init = &self.manifest.init;
        init.scalars
            .iter()
            .chain(&init.constants)
            .flatten()
            .chain(symbols)
            .filter_map(|(k, v)| {
                let value = match v {
                    Value::Bool(b) => PyValue::Bool(*b),
                    v => match (v.as_i64(), v.as_f64()) {
                        (Some(i), _) => PyValue::Int(i),
                        (None, Some(f)) => PyValue::Float(f),
                        _ => return None,
                    },
                };
                Some((k.as_str()?.to_string(), value))
            })
            .collect()
    }
}

/// The relations among a preset's sizes a draw keeps.
struct Relations {
    /// Each varying size, in increasing order of its preset's value: the
    /// earlier one it equals there, and the step it stays a multiple of.
    order: Vec<(String, Option<String>, i64)>,
}

impl Relations {
    fn apply(&self, drawn: &mut Mapping) {
        for (name, equal, step) in &self.order {
            let value = match equal {
                Some(earlier) => int_of(drawn, earlier),
                None => int_of(drawn, name).map(|v| {
                    let multiple = ((v as f64 / *step as f64).round() as i64).max(1);
                    multiple.saturating_mul(*step)
                }),
            };
            if let Some(value) = value {
                set_int(drawn, name, value);
            }
        }
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    (a / x).saturating_mul(b)
}

/// An integer (not a bool) symbol of `symbols`.
fn int_of(symbols: &Mapping, name: &str) -> Option<i64> {
    match symbols.get(name)? {
        Value::Bool(_) => None,
        v => v.as_i64(),
    }
}

fn set_int(symbols: &mut Mapping, name: &str, value: i64) {
    symbols.insert(Value::String(name.to_string()), Value::from(value));
}
