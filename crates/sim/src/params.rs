//! A built-in workload's parameters (`name:key=value,…`) and the units they are given in.

use crate::SimError;
use crate::app::Wait;
use std::collections::BTreeMap;

/// Parameters after `name:` as `key=value` pairs.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pub(crate) map: BTreeMap<String, String>,
    pub(crate) workload: String,
}

impl Params {
    pub(crate) fn parse(workload: &str, text: &str) -> Result<Params, SimError> {
        let mut map = BTreeMap::new();
        for kv in text.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| SimError::Workload {
                name: workload.to_string(),
                why: format!("parameter {kv:?} is not key=value"),
            })?;
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(Params {
            map,
            workload: workload.to_string(),
        })
    }

    pub(crate) fn num(&mut self, key: &str, default: f64) -> Result<f64, SimError> {
        match self.map.remove(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| SimError::Workload {
                    name: self.workload.clone(),
                    why: format!("{key}={v} is not a non-negative number"),
                }),
        }
    }

    pub(crate) fn count(&mut self, key: &str, default: usize) -> Result<usize, SimError> {
        let x = self.num(key, default as f64)?;
        if x < 1.0 || x.fract() != 0.0 {
            return Err(SimError::Workload {
                name: self.workload.clone(),
                why: format!("{key} must be a whole number ≥ 1"),
            });
        }
        Ok(x as usize)
    }

    pub(crate) fn wait(&mut self, default: Wait) -> Result<Wait, SimError> {
        match self.map.remove("wait").as_deref() {
            None => Ok(default),
            Some("spin") => Ok(Wait::Spin),
            Some("yield") => Ok(Wait::Yield),
            Some("block") => Ok(Wait::Block),
            Some(other) => Err(SimError::Workload {
                name: self.workload.clone(),
                why: format!("wait={other} (expected spin, yield or block)"),
            }),
        }
    }

    pub(crate) fn finish(self) -> Result<(), SimError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(k) => Err(SimError::Workload {
                name: self.workload,
                why: format!("unknown parameter {k:?}"),
            }),
        }
    }
}

pub(crate) const MS: f64 = 1e6;
pub(crate) const US: f64 = 1e3;

pub(crate) fn ns(x: f64) -> u64 {
    x.round() as u64
}
