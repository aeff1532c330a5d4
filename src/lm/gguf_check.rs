//! A walk over a GGUF file's header before MLX reads it. MLX's GGUF reader trusts the
//! file (a corrupt header can crash the process), so quest checks the structure first:
//! magic, version, every metadata entry and tensor description within the file, tensor
//! types MLX can load, and tensor data inside the file.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// ggml tensor types MLX's reader supports, by their GGUF number.
const SUPPORTED_TYPES: &[(u32, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (8, "Q8_0"),
];

/// Other common ggml type numbers, for a clearer message.
fn type_name(ty: u32) -> String {
    let known = [
        (6, "Q5_0"),
        (7, "Q5_1"),
        (10, "Q2_K"),
        (11, "Q3_K"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
        (30, "BF16"),
    ];
    known
        .iter()
        .chain(SUPPORTED_TYPES)
        .find(|(n, _)| *n == ty)
        .map_or(format!("type {ty}"), |(_, s)| s.to_string())
}

/// (bytes per block, elements per block) for the supported types.
fn block(ty: u32) -> (u64, u64) {
    match ty {
        0 => (4, 1),
        1 => (2, 1),
        2 => (18, 32),
        3 => (20, 32),
        8 => (34, 32),
        _ => unreachable!(),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: u64) -> Result<&[u8]> {
        let end = self
            .pos
            .checked_add(usize::try_from(n)?)
            .filter(|&e| e <= self.bytes.len());
        let end = end.context("the header runs past the end of the file")?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
    fn string(&mut self) -> Result<String> {
        let len = self.u64()?;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }
    /// Skips one metadata value of GGUF type `ty`.
    fn skip_value(&mut self, ty: u32, depth: u32) -> Result<()> {
        let size = match ty {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => {
                self.string()?;
                return Ok(());
            }
            9 if depth == 0 => {
                let inner = self.u32()?;
                let count = self.u64()?;
                for _ in 0..count {
                    self.skip_value(inner, depth + 1)?;
                }
                return Ok(());
            }
            _ => bail!("a metadata value has an unknown type {ty}"),
        };
        self.take(size)?;
        Ok(())
    }
}

/// Checks `path` is a GGUF file MLX can load, with a message that says what is wrong.
pub fn check(path: &Path) -> Result<()> {
    use std::io::Read;
    let file_len = std::fs::metadata(path)
        .with_context(|| format!("could not read {}", path.display()))?
        .len();
    // The header (vocabulary included) fits in far less; tensor data is only bounds-checked.
    let mut header = Vec::new();
    std::fs::File::open(path)?
        .take(HEADER_LIMIT)
        .read_to_end(&mut header)?;
    check_bytes(&header, file_len).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a GGUF file quest can load: {e}. If it was downloaded, it may be truncated or \
             corrupt: delete it and fetch it again",
            path.display()
        )
    })
}

const HEADER_LIMIT: u64 = 256 << 20;

fn check_bytes(bytes: &[u8], file_len: u64) -> Result<()> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4)? != b"GGUF" {
        bail!("it does not start with the GGUF magic");
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        bail!("GGUF version {version} is not supported (2 or 3)");
    }
    let (tensors, entries) = (r.u64()?, r.u64()?);
    let mut alignment = 32u64;
    for _ in 0..entries {
        let key = r.string()?;
        let ty = r.u32()?;
        if key == "general.alignment" && ty == 4 {
            alignment = r.u32()? as u64;
        } else {
            r.skip_value(ty, 0)?;
        }
    }
    let mut extents = Vec::new();
    for _ in 0..tensors {
        let name = r.string()?;
        let dims = r.u32()?;
        if dims > 4 {
            bail!("tensor {name} claims {dims} dimensions");
        }
        let mut elements = 1u64;
        for _ in 0..dims {
            elements = elements
                .checked_mul(r.u64()?)
                .context("a tensor's size overflows")?;
        }
        let ty = r.u32()?;
        let offset = r.u64()?;
        if !SUPPORTED_TYPES.iter().any(|(n, _)| *n == ty) {
            let supported: Vec<_> = SUPPORTED_TYPES.iter().map(|(_, s)| *s).collect();
            bail!(
                "tensor {name} is {}, which MLX cannot load (supported: {}); use a GGUF quantized as Q4_0, \
                 Q4_1 or Q8_0, or an MLX model directory",
                type_name(ty),
                supported.join(", ")
            );
        }
        let (block_bytes, block_elements) = block(ty);
        extents.push((
            name,
            offset,
            elements.div_ceil(block_elements) * block_bytes,
        ));
    }
    let data_start = (r.pos as u64).div_ceil(alignment.max(1)) * alignment.max(1);
    for (name, offset, size) in extents {
        let end = data_start
            .checked_add(offset)
            .and_then(|s| s.checked_add(size));
        if end.is_none_or(|end| end > file_len) {
            bail!("tensor {name}'s data runs past the end of the file ({file_len} bytes)");
        }
    }
    Ok(())
}
