//! quest's own CUDA kernels inside MLX's graph, behind one small facade: a model's
//! `lm::fast::Fast` (the one place that chooses between the learner's pieces, these
//! kernels and MLX's ops) asks [`Kernels`] at named points — [`Kernels::project`] (a 4-bit matrix times one row, with
//! the ops around it folded in), [`Kernels::heads`] (a decode step's q/k/v heads),
//! [`Kernels::attend`] (a decode step's attention with the cache write) — and gets
//! `None`, "not here", off CUDA, where a kernel is off, or where it does not apply; then
//! MLX's ops run. Which kernels are on is a value the model holds (chosen when it is
//! loaded, [`Kernels::for_process`]), not a process-wide switch.
//!
//! Each kernel runs as an MLX custom kernel (mlx-c's `mlx_fast_cuda_kernel_*`, which mlx-rs
//! does not wrap, [`custom`]): a call is one node of the step's graph like any primitive.
//! A new kernel is one entry in [`Kernel`] and one module beside these.
//!
//! Compiled once per GPU: MLX 0.32.2's CUDA backend compiles a source-text custom kernel in
//! every new process (it keeps none on disk), and quest's take about 10 s to compile on an
//! H200, at their first use, inside the decode loop; a learner's run is a new process each
//! time (`quest run`, `submit`, `bench`). So quest compiles each variant itself and keeps
//! it on disk ([`precompiled`]), and hands MLX the compiled kernel.
//!
//! Where they are on by default (`auto`): where they are kept compiled ([`kept_compiled`]),
//! in every process, handed to MLX by key; and, where they cannot be kept, in a process
//! that warms its graphs up before its clocks start ([`Process::Warmed`]: `quest fit`,
//! `kernel`, `slope`, `batch`), where MLX compiles them from source once.
//! Elsewhere every new process would pay the compile again, which cannot pay
//! (docs/gpu/2026-12-01-fresh/ has the numbers), and MLX's ops run.

pub mod attend;
pub mod custom;
pub mod heads;
pub mod matvec;
pub mod precompiled;
pub mod spec;
pub mod yours;

use anyhow::Result;
use mlx_rs::{Array, Dtype};

use crate::device::Backend;
pub use heads::HeadsSpec;
pub use matvec::Fold;
pub use spec::KernelSource;
pub use yours::YourKernel;

/// quest's kernels, each replacing some of MLX's ops in a decode step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// A 4-bit matrix times one row ([`matvec`]), for MLX's `quantized_matmul` and the
    /// norm, SwiGLU and residual add around it.
    Matvec,
    /// A decode step's q, k and v heads from the fused projection — per-head q/k norm and
    /// RoPE included — in one kernel ([`heads`]), for a split, three reshapes, two norms
    /// and two RoPEs.
    Qkv,
    /// A decode step's attention from the fused projection's row: the heads as
    /// [`Kernel::Qkv`] makes them, the new key and value written into the cache, attention
    /// over it ([`attend`]), for the q/k/v kernel, two cache writes, two cache views,
    /// MLX's attention and a reshape.
    Attend,
}

impl Kernel {
    pub const ALL: [Kernel; 3] = [Kernel::Matvec, Kernel::Qkv, Kernel::Attend];
    pub const CHOICES: &'static str = "matvec, qkv or attend";

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Matvec => "matvec",
            Kernel::Qkv => "qkv",
            Kernel::Attend => "attend",
        }
    }

    /// The setting that chooses it (`quest`, `mlx` or `auto`).
    pub fn setting(self) -> &'static crate::settings::Setting {
        match self {
            Kernel::Matvec => &crate::settings::QMV,
            Kernel::Qkv => &crate::settings::QKV,
            Kernel::Attend => &crate::settings::ATTEND,
        }
    }

    /// Every kernel's sources for a few example shapes and every compiled variant: to
    /// compile them off the GPU (`quest dev kernels`).
    fn sources(self) -> Result<Vec<KernelSource>> {
        match self {
            Kernel::Matvec => matvec::sources(),
            Kernel::Qkv => heads::sources(),
            Kernel::Attend => attend::sources(),
        }
    }
}

impl std::str::FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kernel `{s}`; use {}", Kernel::CHOICES))
    }
}

/// Whose code runs where a kernel of quest's could.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// MLX's own ops.
    Mlx,
    /// quest's kernel.
    Quest,
}

impl Impl {
    pub fn as_str(self) -> &'static str {
        match self {
            Impl::Mlx => "mlx",
            Impl::Quest => "quest",
        }
    }
}

/// A kernel's setting: `quest`, `mlx`, or `auto` ([`Kernels::for_process`] decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Auto,
    Is(Impl),
}

impl std::str::FromStr for Choice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "mlx" => Ok(Choice::Is(Impl::Mlx)),
            "quest" => Ok(Choice::Is(Impl::Quest)),
            other => Err(format!("unknown choice `{other}`; use quest, mlx or auto")),
        }
    }
}

/// How the process that builds the graphs times them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Process {
    /// Its clocks start with its first graph (an exercise: every run a new process).
    Fresh,
    /// It runs every graph once before its clocks start (the in-process benchmarks).
    Warmed,
}

/// Which of quest's kernels a model's graphs use, and how MLX gets them. A value the model
/// holds: two models in one process (or one test beside another) never share a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernels {
    on: [bool; Kernel::ALL.len()],
    /// Hand MLX the kernels quest compiled, not their source.
    hand_compiled: bool,
    /// Fold each sublayer's norm and residual add into its projections even where
    /// quest's matvec does not run (MLX's ops in the folded order): to check that order.
    fold_order: bool,
    /// Some or all off because the model runs a learner's pieces or decoder
    /// ([`Kernels::FOR_PIECES`], [`Kernels::off_for_a_piece`]).
    for_pieces: bool,
}

impl Kernels {
    /// MLX's ops everywhere.
    pub const NONE: Kernels = Kernels {
        on: [false; Kernel::ALL.len()],
        hand_compiled: false,
        fold_order: false,
        for_pieces: false,
    };

    /// MLX's ops everywhere, because the model runs a learner's pieces (or the learner's
    /// whole decoder): quest's kernels would take over the parts a piece replaces, so
    /// neither the learner's run nor its baseline uses them.
    pub const FOR_PIECES: Kernels = Kernels {
        for_pieces: true,
        ..Kernels::NONE
    };

    /// These kernels with `kernel` off because a learner's piece takes the place of part
    /// of its code: the others stay as they are.
    pub fn off_for_a_piece(mut self, kernel: Kernel) -> Self {
        if self.on[kernel as usize] {
            self.on[kernel as usize] = false;
            self.for_pieces = true;
        }
        self
    }

    /// Every kernel on, whatever the backend: for tests of the decisions about them (off
    /// CUDA none can run, and [`Kernels::with`] keeps them off).
    #[cfg(test)]
    pub(crate) const EVERY_ONE: Kernels = Kernels {
        on: [true; Kernel::ALL.len()],
        ..Kernels::NONE
    };

    /// Whether some are off for a learner's pieces ([`Kernels::FOR_PIECES`],
    /// [`Kernels::off_for_a_piece`]).
    pub fn for_pieces(&self) -> bool {
        self.for_pieces
    }

    /// What the settings ask for in a process of this kind. Off CUDA, none: there is
    /// nothing of quest's to run. `auto` is quest's kernel where it kept SmolLM2's greedy
    /// tokens and was ahead of MLX's ops on six shapes on an H200 (all three), if the
    /// process is warmed or the kernels are kept compiled; MLX's ops otherwise.
    pub fn for_process(process: Process) -> Result<Self> {
        if Backend::detect() != Backend::Cuda {
            return Ok(Kernels::NONE);
        }
        // Read where a kernel is placed (precompiled::Compiled::place) and where the
        // compiler is made (precompiled::compiler); checked here, where a mistyped value
        // can stop the run with its message.
        crate::settings::KERNEL_HANDOFF.parse::<precompiled::Handoff>()?;
        let cache = crate::settings::KERNEL_CACHE.parse::<precompiled::KernelCache>()?;
        let kept = kept_compiled();
        let auto = process == Process::Warmed || kept;
        let mut kernels = Kernels {
            hand_compiled: kept
                && (process == Process::Fresh || cache == precompiled::KernelCache::On),
            ..Kernels::NONE
        };
        for kernel in Kernel::ALL {
            kernels.on[kernel as usize] = match kernel.setting().parse::<Choice>()? {
                Choice::Auto => auto,
                Choice::Is(choice) => choice == Impl::Quest,
            };
        }
        Ok(kernels)
    }

    /// These kernels with `kernel` set to `choice` (e.g. to interleave both in one run).
    /// Off CUDA quest's kernels never run, whatever is chosen.
    pub fn with(mut self, kernel: Kernel, choice: Impl) -> Self {
        self.on[kernel as usize] = choice == Impl::Quest && Backend::detect() == Backend::Cuda;
        self
    }

    /// These kernels, a decode step's sublayers folded as quest's matvec folds them,
    /// whether or not it runs: where it does not, MLX's ops compute the same in that order.
    pub fn folding(mut self) -> Self {
        self.fold_order = true;
        self
    }

    /// Whether a decode step folds each sublayer's norm into the projection that reads it
    /// and its residual add into the one that ends it.
    pub fn folds(&self) -> bool {
        self.fold_order || self.uses(Kernel::Matvec)
    }

    /// Whether quest's `kernel` runs in graphs built with these.
    pub fn uses(&self, kernel: Kernel) -> bool {
        self.on[kernel as usize]
    }

    /// What runs for `kernel`.
    pub fn choice(&self, kernel: Kernel) -> Impl {
        if self.uses(kernel) {
            Impl::Quest
        } else {
            Impl::Mlx
        }
    }

    /// The names of quest's kernels these run (none off CUDA): what a report says it
    /// measured.
    pub fn running(&self) -> Vec<&'static str> {
        Kernel::ALL
            .into_iter()
            .filter(|k| self.uses(*k))
            .map(Kernel::name)
            .collect()
    }

    /// Whether MLX is handed the kernels quest compiled and kept (a fresh process), rather
    /// than compiling their source itself.
    pub fn kept(&self) -> bool {
        self.hand_compiled && self.on.iter().any(|on| *on)
    }

    /// `x · Wᵀ` for a 4-bit matrix, with `fold`'s ops around it, in quest's matvec;
    /// `None`: not here (MLX's ops, the caller's).
    #[allow(clippy::too_many_arguments)]
    pub fn project(
        &self,
        x: &Array,
        weight: &Array,
        scales: &Array,
        biases: &Array,
        group_size: i32,
        bits: i32,
        fold: &Fold,
    ) -> Result<Option<Array>> {
        if !self.uses(Kernel::Matvec) {
            return Ok(None);
        }
        let quantized = matvec::Quantized {
            weight,
            scales,
            biases,
            group_size,
            bits,
        };
        matvec::matvec(x, &quantized, fold, self.hand_compiled)
    }

    /// A decode step's `[q, k, v]` heads from the fused projection's row, q and k normed
    /// and rotated to `offset`; `None`: not here.
    pub fn heads(&self, qkv: &Array, spec: &HeadsSpec, offset: i32) -> Result<Option<[Array; 3]>> {
        if !self.uses(Kernel::Qkv) {
            return Ok(None);
        }
        heads::heads(qkv, spec, offset, self.hand_compiled)
    }

    /// A decode step's attention output from the fused projection's row, the new key and
    /// value written into `cache`; `None`: not here (the cache untouched).
    pub fn attend(
        &self,
        qkv: &Array,
        spec: &HeadsSpec,
        cache: &mut dyn CacheWrite,
    ) -> Result<Option<Array>> {
        if !self.uses(Kernel::Attend) {
            return Ok(None);
        }
        attend::attend(qkv, spec, cache, self.hand_compiled)
    }
}

/// What [`Kernels::attend`] needs of a KV cache to write a position in place: its
/// buffers with room for one more, and to be told it was written. The model's cache
/// implements it and decides when writing in place is sound.
pub trait CacheWrite {
    /// Positions already held.
    fn offset(&self) -> i32;
    /// The key and value buffers with room for one more position of `[b, h]` heads of `d`
    /// channels in `dtype`, or `None` where they must not be written in place.
    fn buffers_to_write(&mut self, bhd: [i32; 3], dtype: Dtype) -> Result<Option<(Array, Array)>>;
    /// One position was written by the kernel that computes `step`.
    fn wrote_one(&mut self, step: &Array);
}

/// Whether quest's kernels are kept compiled across processes (by quest, on disk), so a new
/// process need not compile them again: on CUDA, where NVRTC and the GPU's architecture
/// were found ([`precompiled::compiler`]).
pub fn kept_compiled() -> bool {
    Backend::detect() == Backend::Cuda && precompiled::compiler().is_some()
}

/// Every CUDA kernel of quest's as MLX would compile it, for a few example shapes and
/// every compiled variant: to compile them off the GPU (`quest dev kernels`).
pub fn sources() -> Result<Vec<KernelSource>> {
    let mut all = Vec::new();
    for kernel in Kernel::ALL {
        all.extend(kernel.sources()?);
    }
    Ok(all)
}

thread_local! {
    static POSITION: std::cell::RefCell<Option<(i32, Array)>> = const { std::cell::RefCell::new(None) };
}

/// `[position]` as an int32 array for a kernel's input: the same array for every layer of
/// a step (each new array is host work, and a step asks once a layer).
fn position(position: i32) -> Array {
    POSITION.with(|cell| {
        let mut cell = cell.borrow_mut();
        match &*cell {
            Some((p, array)) if *p == position => array.clone(),
            _ => {
                let array = Array::from_slice(&[position], &[1]);
                *cell = Some((position, array.clone()));
                array
            }
        }
    })
}

/// Zeros in float16, the dtype quest's kernels take: the kernels' tests' inputs.
#[cfg(test)]
fn zeros_f16(shape: &[i32]) -> Array {
    Array::zeros::<f32>(shape)
        .unwrap()
        .as_dtype(Dtype::Float16)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_and_choices_parse_and_name_themselves() {
        for k in Kernel::ALL {
            assert_eq!(k.name().parse::<Kernel>(), Ok(k));
            assert!(k.setting().name.starts_with("QUEST_"));
            assert_eq!(k.setting().default, "auto");
        }
        for c in [Impl::Mlx, Impl::Quest] {
            assert_eq!(c.as_str().parse::<Choice>(), Ok(Choice::Is(c)));
        }
        let err = "cublas".parse::<Choice>().unwrap_err();
        assert!(err.contains("quest, mlx or auto"), "{err}");
        let err = "rope".parse::<Kernel>().unwrap_err();
        assert!(err.contains(Kernel::CHOICES), "{err}");
    }

    #[test]
    fn each_kernel_has_its_own_switch_in_its_own_value() {
        let cuda = Backend::detect() == Backend::Cuda;
        let a = Kernels::NONE.with(Kernel::Matvec, Impl::Quest);
        let b = a
            .with(Kernel::Qkv, Impl::Quest)
            .with(Kernel::Matvec, Impl::Mlx);
        // Setting one value leaves the other as it was: no shared switch.
        assert_eq!(a.uses(Kernel::Matvec), cuda);
        assert!(!a.uses(Kernel::Qkv));
        assert!(!b.uses(Kernel::Matvec));
        assert_eq!(b.uses(Kernel::Qkv), cuda);
        assert_eq!(b.running(), if cuda { vec!["qkv"] } else { vec![] });
    }

    #[test]
    fn off_cuda_nothing_of_quests_runs() {
        if Backend::detect() == Backend::Cuda {
            return;
        }
        for process in [Process::Fresh, Process::Warmed] {
            assert_eq!(Kernels::for_process(process).unwrap(), Kernels::NONE);
        }
        let all = Kernel::ALL
            .into_iter()
            .fold(Kernels::NONE, |k, kernel| k.with(kernel, Impl::Quest));
        assert!(all.running().is_empty());
        let x = zeros_f16(&[1, 1, 256]);
        let w = Array::zeros::<u32>(&[8, 32]).unwrap();
        let s = zeros_f16(&[8, 8]);
        assert!(all
            .project(&x, &w, &s, &s, 32, 4, &Fold::default())
            .unwrap()
            .is_none());
    }

    #[test]
    fn every_kernel_can_be_written_for_a_compiler() {
        let sources = sources().unwrap();
        let mut names: Vec<&str> = sources
            .iter()
            .map(|s| {
                let start = s.text.find("custom_kernel_").expect("a kernel function") + 14;
                let len = s.text[start..].find('(').unwrap();
                &s.text[start..start + len]
            })
            .collect();
        names.sort();
        names.dedup();
        // One compiled kernel per entry of the list: a new kernel brings its sources.
        assert_eq!(names.len(), Kernel::ALL.len(), "{names:?}");
        let mut files: Vec<&str> = sources.iter().map(|s| s.file.as_str()).collect();
        files.sort();
        files.dedup();
        assert_eq!(
            files.len(),
            sources.len(),
            "two sources under one file name"
        );
    }
}
