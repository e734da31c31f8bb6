//! The report's thread counts, from the CPUs it runs on.
//!
//! Every multi-thread experiment takes its counts from here: the scaling axis 1, 2, 4, … up
//! to every CPU the process may use, the counts claims are judged at (2, so that reports of
//! different machines compare, and all CPUs), and the points where threads far outnumber
//! CPUs (4× and 16× the CPUs), where an experiment is about them. With `--cpus N` the
//! report simulates a machine of N CPUs on this one: counts follow N, runs see a simulated
//! topology and simulated CPU ids, and their times mean nothing.

use hab::CpuIdSource;

/// The thread counts of one report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threads {
    /// CPUs the counts are made for: this machine's, or the simulated one's.
    cpus: usize,
    /// CPUs the process really runs on; work per run is bounded by them.
    real_cpus: usize,
    /// Whether `cpus` is a simulated machine (`--cpus`).
    simulated: bool,
}

impl Threads {
    /// A placeholder in the scales' constants, which [`Scale::new`](super::scale::Scale::new)
    /// replaces with the machine's counts.
    pub(super) const UNSET: Threads = Threads {
        cpus: 1,
        real_cpus: 1,
        simulated: false,
    };

    /// The counts for this machine: the CPUs the process may use, as its affinity mask and
    /// its cgroup's CPU quota allow ([`std::thread::available_parallelism`]).
    pub fn of_this_machine() -> Threads {
        let cpus = usable_cpus();
        Threads {
            cpus,
            real_cpus: cpus,
            simulated: false,
        }
    }

    /// The counts for a simulated machine of `cpus` CPUs, run on this one.
    pub fn simulated(cpus: usize) -> Threads {
        Threads {
            cpus: cpus.max(1),
            real_cpus: usable_cpus(),
            simulated: true,
        }
    }

    /// The counts for a machine of `cpus` CPUs, as if run there.
    #[cfg(test)]
    pub fn of(cpus: usize) -> Threads {
        Threads {
            cpus: cpus.max(1),
            real_cpus: cpus.max(1),
            simulated: false,
        }
    }

    /// The CPUs the counts are made for.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// Whether the machine is simulated: its runs' times mean nothing.
    pub fn is_simulated(&self) -> bool {
        self.simulated
    }

    /// The simulated topology every run uses (`1xNx1`: one package of N single-thread
    /// cores), or `None` to read the machine's.
    pub fn topology(&self) -> Option<String> {
        self.simulated.then(|| format!("1x{}x1", self.cpus))
    }

    /// The CPU-id source of the simulated machine: a virtual CPU per thread that moves to
    /// another with probability 1 % at each refill. `None` lets the heap choose.
    pub fn cpu_id(&self) -> Option<CpuIdSource> {
        self.simulated.then_some(CpuIdSource::Simulated {
            seed: 1,
            migrate_probability: 0.01,
        })
    }

    /// The scaling axis: 1, 2, 4, … doubling up to every CPU, and every CPU where that is
    /// not a power of two. 2 is always there, so that every report has the 2-thread points
    /// earlier reports judged their claims at.
    pub fn scaling(&self) -> Vec<usize> {
        let mut counts = doubling_to(self.cpus.max(2));
        if !counts.contains(&self.cpus) {
            counts.push(self.cpus);
        }
        counts
    }

    /// Where claims are judged: 2 threads and every CPU (one count where the two are one,
    /// and 2 alone on one CPU, where every CPU is one thread).
    pub fn claimed(&self) -> Vec<usize> {
        dedup(vec![2, self.cpus.max(2)])
    }

    /// One thread and every CPU: the summary's columns.
    pub fn ends(&self) -> Vec<usize> {
        dedup(vec![1, self.cpus])
    }

    /// One thread, 2 and every CPU: where an experiment too long to run on the whole
    /// scaling axis runs.
    pub fn ends_and_two(&self) -> Vec<usize> {
        dedup(vec![1, 2, self.cpus])
    }

    /// Threads far more numerous than CPUs: 4× and 16× the CPUs.
    pub fn oversubscribed(&self) -> [usize; 2] {
        [4 * self.cpus, 16 * self.cpus]
    }

    /// The scaling axis from 2 threads on, then the oversubscribed points.
    pub fn two_to_oversubscribed(&self) -> Vec<usize> {
        let mut counts: Vec<usize> = self.scaling().into_iter().filter(|&n| n >= 2).collect();
        counts.extend(self.oversubscribed());
        dedup(counts)
    }

    /// Garthwaite et al.'s axis of warehouse threads, which goes far past the processors: 1,
    /// 2, 4, … doubling up to 32 per CPU.
    pub fn warehouses(&self) -> Vec<usize> {
        doubling_to(self.cpus * 32)
    }

    /// Objects per thread for a run of `threads` threads, from `objects` per thread with at
    /// most one thread per CPU: beyond the CPUs the process really runs on, each thread
    /// gets a share, so a run's total work stays what every CPU does with `objects` each.
    pub fn objects_per_thread(&self, objects: usize, threads: usize) -> usize {
        if threads <= self.real_cpus {
            objects
        } else {
            (objects * self.real_cpus / threads).max(1)
        }
    }

    /// How the report says where its counts come from.
    pub fn describe(&self) -> String {
        let scaling: Vec<String> = self.scaling().iter().map(usize::to_string).collect();
        let [four, sixteen] = self.oversubscribed();
        let source = if self.simulated {
            format!(
                "a simulated machine of {} CPUs (`--cpus {}`, topology `{}`, simulated CPU \
                 ids), run on {} real CPUs: counts (collections, waste, foreign allocations, \
                 refills, instructions) are what that machine would see; **times mean nothing \
                 here**, and so neither do the claims judged on them",
                self.cpus,
                self.cpus,
                self.topology().unwrap_or_default(),
                self.real_cpus
            )
        } else {
            format!(
                "the {} CPUs this process may use (its affinity mask and CPU quota)",
                self.cpus
            )
        };
        format!(
            "Thread counts follow {source}: the scaling axis is {} threads, claims are judged \
             at {} threads, and experiments about threads far outnumbering CPUs add {four} and \
             {sixteen}. Beyond {} thread(s), runs share out the objects of {} thread(s), so \
             that a run's work stays bounded.",
            scaling.join(", "),
            self.claimed()
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(" and "),
            self.real_cpus,
            self.real_cpus
        )
    }
}

/// The CPUs this process may use: its affinity mask, bounded by its cgroup's CPU quota.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// 1, 2, 4, … up to `max` (powers of two only).
fn doubling_to(max: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |&n| n.checked_mul(2))
        .take_while(|&n| n <= max.max(1))
        .collect()
}

/// `counts` sorted, each once.
fn dedup(mut counts: Vec<usize>) -> Vec<usize> {
    counts.sort_unstable();
    counts.dedup();
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axes_follow_the_cpus() {
        // (CPUs, scaling axis, claimed at, oversubscribed)
        type Case = (usize, &'static [usize], &'static [usize], [usize; 2]);
        let cases: [Case; 5] = [
            (1, &[1, 2], &[2], [4, 16]),
            (2, &[1, 2], &[2], [8, 32]),
            (16, &[1, 2, 4, 8, 16], &[2, 16], [64, 256]),
            (80, &[1, 2, 4, 8, 16, 32, 64, 80], &[2, 80], [320, 1280]),
            (
                256,
                &[1, 2, 4, 8, 16, 32, 64, 128, 256],
                &[2, 256],
                [1024, 4096],
            ),
        ];
        for (cpus, scaling, claimed, oversubscribed) in cases {
            let threads = Threads::of(cpus);
            assert_eq!(threads.scaling(), scaling, "{cpus} CPUs");
            assert_eq!(threads.claimed(), claimed, "{cpus} CPUs");
            assert_eq!(threads.oversubscribed(), oversubscribed, "{cpus} CPUs");
            assert_eq!(threads.ends(), dedup(vec![1, cpus]), "{cpus} CPUs");
            assert!(threads.scaling().contains(&cpus));
            // Every claimed count is on the scaling axis and in Kirsch's grid.
            for count in threads.claimed() {
                assert!(threads.scaling().contains(&count), "{cpus} CPUs");
                assert!(threads.two_to_oversubscribed().contains(&count));
            }
        }
        // The 2-CPU machine keeps the counts of earlier reports.
        let two = Threads::of(2);
        assert_eq!(two.two_to_oversubscribed(), [2, 8, 32]);
        assert_eq!(two.warehouses(), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(
            Threads::of(16).two_to_oversubscribed(),
            [2, 4, 8, 16, 64, 256]
        );
        assert_eq!(
            Threads::of(80).two_to_oversubscribed(),
            [2, 4, 8, 16, 32, 64, 80, 320, 1280]
        );
    }

    #[test]
    fn work_per_run_is_bounded_by_the_real_cpus() {
        let two = Threads::of(2);
        assert_eq!(two.objects_per_thread(1000, 1), 1000);
        assert_eq!(two.objects_per_thread(1000, 2), 1000);
        assert_eq!(two.objects_per_thread(1000, 8), 250);
        assert_eq!(two.objects_per_thread(1, 4096), 1);
        let simulated = Threads {
            cpus: 80,
            real_cpus: 2,
            simulated: true,
        };
        assert_eq!(simulated.objects_per_thread(1000, 80), 25);
        assert_eq!(simulated.topology().as_deref(), Some("1x80x1"));
        assert!(simulated.cpu_id().is_some());
        assert!(simulated.describe().contains("times mean nothing"));
        assert_eq!(Threads::of(16).topology(), None);
    }
}
