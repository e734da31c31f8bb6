//! HotSpot's side of the report: its measurements (or why there are none) and how each
//! section finds the point that goes beside Hab's in its tables and plots.

use super::jvm::{JvmTlab, Point};
use crate::figures::Spread;

/// HotSpot's measurements, or why there are none.
pub enum HotSpot {
    Measured { version: String, points: Vec<Point> },
    Skipped(String),
}

impl HotSpot {
    /// The first point of `workload` that `keep` accepts.
    pub fn find(&self, workload: &str, keep: impl Fn(&Point) -> bool) -> Option<&Point> {
        match self {
            HotSpot::Measured { points, .. } => {
                points.iter().find(|p| p.workload == workload && keep(p))
            }
            HotSpot::Skipped(_) => None,
        }
    }

    /// HotSpot's `alloc-array` time per object with these TLABs, in ns.
    pub fn alloc_array_ns(&self, tlab: JvmTlab) -> Option<f64> {
        self.find("alloc-array", |p| p.config == tlab.config())
            .and_then(|p| p.ns_per_object)
    }

    /// HotSpot's `alloc-array` time per object with these TLABs in ns, over its iterations.
    pub fn alloc_array(&self, tlab: JvmTlab) -> Option<Spread> {
        self.find("alloc-array", |p| p.config == tlab.config())
            .and_then(Point::ns)
    }

    /// HotSpot's `alloc-array` time per object with these TLABs, `median (min–max)` in ns.
    pub fn alloc_array_spread(&self, tlab: JvmTlab) -> String {
        self.find("alloc-array", |p| p.config == tlab.config())
            .map_or("—".into(), Point::ns_spread)
    }

    pub fn measured(&self) -> bool {
        matches!(self, HotSpot::Measured { .. })
    }

    /// One paragraph for the top of the report: which JVM ran beside Hab, or why none did and
    /// how to make one run.
    pub fn note(&self) -> String {
        match self {
            HotSpot::Measured { version, .. } => format!(
                "HotSpot ran beside Hab in this run: `bench/jvm` (the same workloads in Java) on \
                 {version}. Its points are in the tables and plots of each section, marked \
                 HotSpot; `data/hotspot.json` has each with the command that reproduces it.\n\n"
            ),
            HotSpot::Skipped(why) => format!(
                "HotSpot was not measured in this run: {why}. With Java 17 or later and Maven on \
                 the PATH, `hab report` builds `bench/jvm` (the same workloads in Java) and puts \
                 HotSpot's points beside Hab's in every section; `hab report --quick --jvm` does \
                 so at the quick scale. The HotSpot columns below read —.\n\n"
            ),
        }
    }
}

/// A run's time in ms and its collections, `ms; n GCs` ("—" where HotSpot did not run it).
pub fn time_and_collections(point: Option<&Point>) -> String {
    point.map_or("—".into(), |p| {
        format!(
            "{}; {} GCs",
            cell(p.value, 0),
            p.collections.map_or("—".into(), |gcs| gcs.to_string())
        )
    })
}

/// A figure with `digits` decimals, or — when HotSpot has none.
pub fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or("—".into(), |v| format!("{v:.digits$}"))
}

/// How fast this machine writes memory: zeroing a pre-touched GiB, best of 3, in GB/s.
pub fn write_bandwidth_gbps() -> f64 {
    let mut buffer = vec![1u8; 1 << 30];
    (0..3)
        .map(|round| {
            let started = std::time::Instant::now();
            buffer.fill(round);
            std::hint::black_box(&buffer);
            buffer.len() as f64 / started.elapsed().as_secs_f64() / 1e9
        })
        .fold(0.0, f64::max)
}
