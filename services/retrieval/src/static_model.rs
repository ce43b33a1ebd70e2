//! A static embedder distilled from the local MiniLM: one vector per vocabulary token, and a
//! text's vector is the normalised weighted mean of its tokens' vectors.
//!
//! A 256-token item costs MiniLM about 10 GFLOP; the same item costs the table a tokenisation
//! and a few hundred additions of 384 floats, so a backlog of coding-session items can be
//! embedded hundreds of times faster, at some cost in quality (measured by `mneme-bench embed`).
//!
//! Distillation runs every token of the tokenizer's vocabulary through the model once, as the
//! one-token text `[CLS] token [SEP]`, and keeps the mean-pooled, L2-normalised output: that is
//! exactly the vector the shipped model gives a text made of that single token, so the table
//! lives in MiniLM's own space (a static query lands near the MiniLM vector of the same word)
//! and the special tokens carry the same share as in any short MiniLM input. The raw output of
//! the token's position alone would leave out the `[CLS]`/`[SEP]` context MiniLM always pools.
//!
//! The table is cached as one file (see [`StaticModel::save`]): an 8-byte magic, a
//! little-endian u32 header length, a JSON header naming the source model, the vocabulary size
//! and the dimensions, then `vocab × dim` little-endian f32. It is derived data: never commit it.

use crate::models::LocalModel;
use anyhow::{Context as _, bail};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokenizers::Tokenizer;

/// The first bytes of a cached table; the digit is the format version.
const MAGIC: &[u8; 8] = b"MNSTAT01";

/// How distillation pools a token (recorded in the header, so a table distilled another way is
/// never mistaken for this one).
const POOLING: &str = "mean([CLS] token [SEP]), l2";

/// Tokens per distillation batch: each row is three tokens long, so a batch is cheap and large
/// batches keep the matrix products efficient.
const DISTIL_BATCH: usize = 512;

/// How a text's token vectors are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    /// Subtract the vocabulary's mean vector from every token vector before pooling: the mean
    /// is a direction all tokens share, so it pulls every text towards every other one.
    pub centre: bool,
    /// Weight whole-word tokens by `ln(1 + rank)` of their vocabulary position (BERT's word
    /// pieces are listed roughly from frequent to rare), as Model2Vec's Zipf weighting does,
    /// so rare, telling words count more than `the` and `is`.
    pub zipf: bool,
}

impl Variant {
    /// Plain mean of the distilled vectors.
    pub const PLAIN: Variant = Variant {
        centre: false,
        zipf: false,
    };

    /// A short name for reports.
    pub fn label(&self) -> String {
        match (self.centre, self.zipf) {
            (false, false) => "plain".to_owned(),
            (true, false) => "centred".to_owned(),
            (false, true) => "zipf".to_owned(),
            (true, true) => "centred+zipf".to_owned(),
        }
    }
}

/// The distilled table and the tokenizer that indexes it.
#[derive(Clone)]
pub struct StaticModel {
    id: String,
    source: String,
    dim: usize,
    vocab: usize,
    /// `vocab × dim` row-major, as distilled (unit rows).
    table: Vec<f32>,
    /// The table the embedder reads: `table` after the variant's centring.
    active: Vec<f32>,
    weights: Vec<f32>,
    variant: Variant,
    /// The model's tokenizer without padding or truncation: a static text is the whole text.
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for StaticModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticModel")
            .field("id", &self.id)
            .field("vocab", &self.vocab)
            .field("dim", &self.dim)
            .finish()
    }
}

impl StaticModel {
    /// Distil the table from `model`: every vocabulary token through the model once.
    pub fn distil(model: &LocalModel) -> anyhow::Result<StaticModel> {
        StaticModel::distil_only(model, |_| true)
    }

    /// Distil only the tokens `keep` accepts and leave the other rows zero (weightless): a
    /// full table takes minutes, and a test needs only the tokens of its texts.
    fn distil_only(model: &LocalModel, keep: impl Fn(u32) -> bool) -> anyhow::Result<StaticModel> {
        let tokenizer = model.tokenizer();
        let vocab = tokenizer.get_vocab_size(true);
        let special = |name: &str| {
            tokenizer
                .token_to_id(name)
                .with_context(|| format!("the tokenizer has no {name} token"))
        };
        let (cls, sep) = (special("[CLS]")?, special("[SEP]")?);
        let dim = model.dim();
        let mut table = vec![0f32; vocab * dim];
        let ids: Vec<u32> = (0..vocab as u32).filter(|&id| keep(id)).collect();
        for chunk in ids.chunks(DISTIL_BATCH) {
            let rows: Vec<Vec<u32>> = chunk.iter().map(|&id| vec![cls, id, sep]).collect();
            let vectors = model.embed_token_ids(&rows)?;
            anyhow::ensure!(
                vectors.len() == chunk.len(),
                "the model returned {} vectors for {} tokens",
                vectors.len(),
                chunk.len()
            );
            for (&id, vector) in chunk.iter().zip(vectors) {
                anyhow::ensure!(
                    vector.len() == dim,
                    "the model returned {} dimensions",
                    vector.len()
                );
                let at = id as usize * dim;
                table[at..at + dim].copy_from_slice(&vector);
            }
        }
        StaticModel::from_table(model.id().to_owned(), dim, vocab, table, tokenizer.clone())
    }

    /// The cached table of the model in `model_dir`, from `cache_dir`, distilled and cached
    /// first when missing or made from other weights. Returns how long distillation took when
    /// it ran.
    pub fn load_or_distil(
        model_dir: &Path,
        cache_dir: &Path,
    ) -> anyhow::Result<(StaticModel, Option<Duration>)> {
        StaticModel::for_model(&LocalModel::load(model_dir)?, cache_dir)
    }

    /// The cached table of `model`, from `cache_dir`, distilled and cached first when missing
    /// or made from other weights. Returns how long distillation took when it ran.
    ///
    /// Distillation holds a lock file in `cache_dir`: services and tests sharing one cache
    /// distil once, and the others wait and load what it wrote.
    pub fn for_model(
        model: &LocalModel,
        cache_dir: &Path,
    ) -> anyhow::Result<(StaticModel, Option<Duration>)> {
        let path = StaticModel::cache_path(cache_dir, model.id());
        let cached = || -> Option<StaticModel> {
            if !path.is_file() {
                return None;
            }
            match StaticModel::load(&path, model.tokenizer().clone()) {
                Ok(loaded) if loaded.source == model.id() => Some(loaded),
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), path = %path.display(), "distilling again: the cached static table is unreadable");
                    None
                }
            }
        };
        if let Some(loaded) = cached() {
            return Ok((loaded, None));
        }
        std::fs::create_dir_all(cache_dir)
            .with_context(|| format!("creating {}", cache_dir.display()))?;
        let lock_path = path.with_extension("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        lock.lock()
            .with_context(|| format!("locking {}", lock_path.display()))?;
        // Another process may have distilled while this one waited for the lock.
        if let Some(loaded) = cached() {
            return Ok((loaded, None));
        }
        let started = Instant::now();
        let distilled = StaticModel::distil(model)?;
        let took = started.elapsed();
        distilled.save(&path)?;
        Ok((distilled, Some(took)))
    }

    /// Where the table of the model `source` is cached in `dir`.
    pub fn cache_path(dir: &Path, source: &str) -> PathBuf {
        let name: String = source
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        dir.join(format!("static-{name}.bin"))
    }

    fn from_table(
        source: String,
        dim: usize,
        vocab: usize,
        table: Vec<f32>,
        tokenizer: Tokenizer,
    ) -> anyhow::Result<StaticModel> {
        anyhow::ensure!(
            table.len() == vocab * dim,
            "the table holds {} floats, not {vocab} × {dim}",
            table.len()
        );
        let mut tokenizer = tokenizer;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| anyhow::anyhow!("removing truncation: {e}"))?;
        let mut model = StaticModel {
            id: String::new(),
            source,
            dim,
            vocab,
            active: Vec::new(),
            table,
            weights: Vec::new(),
            variant: Variant::PLAIN,
            tokenizer,
        };
        model.set_variant(Variant::PLAIN);
        Ok(model)
    }

    /// Switch how token vectors are combined; the id changes with it, since the vectors do.
    pub fn set_variant(&mut self, variant: Variant) {
        self.variant = variant;
        self.id = format!("static/{}/{}", self.source, variant.label());
        self.active = self.table.clone();
        if variant.centre {
            let mut mean = vec![0f32; self.dim];
            for row in self.table.chunks_exact(self.dim) {
                mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
            }
            mean.iter_mut().for_each(|m| *m /= self.vocab as f32);
            for row in self.active.chunks_exact_mut(self.dim) {
                row.iter_mut().zip(&mean).for_each(|(x, m)| *x -= m);
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                row.iter_mut().for_each(|x| *x /= norm);
            }
        }
        self.weights = (0..self.vocab)
            .map(|id| {
                let token = self.tokenizer.id_to_token(id as u32).unwrap_or_default();
                // Special tokens never come from a text tokenised without them, except [UNK];
                // it says nothing about the text.
                if token.starts_with('[') && token.ends_with(']') {
                    0.0
                } else if variant.zipf {
                    ((id + 1) as f32).ln()
                } else {
                    1.0
                }
            })
            .collect();
    }

    /// The id of the vector space this table produces (the source model's id and the variant).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id of the model the table was distilled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Vector dimensions.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows of the table.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The distilled table, row-major.
    pub fn table(&self) -> &[f32] {
        &self.table
    }

    /// Write the table to `path` (see the module documentation for the format).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let header = serde_json::json!({
            "source": self.source,
            "vocab": self.vocab,
            "dim": self.dim,
            "pooling": POOLING,
        })
        .to_string();
        let mut bytes = Vec::with_capacity(12 + header.len() + self.table.len() * 4);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        for x in &self.table {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        // Written aside and renamed, so a reader never sees half a table.
        let partial = path.with_extension("partial");
        let mut file = std::fs::File::create(&partial)
            .with_context(|| format!("creating {}", partial.display()))?;
        file.write_all(&bytes)
            .with_context(|| format!("writing {}", partial.display()))?;
        file.sync_all()?;
        std::fs::rename(&partial, path)
            .with_context(|| format!("renaming {} to {}", partial.display(), path.display()))?;
        Ok(())
    }

    /// Read a table written by [`StaticModel::save`]; `tokenizer` is the source model's.
    pub fn load(path: &Path, tokenizer: Tokenizer) -> anyhow::Result<StaticModel> {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .with_context(|| format!("reading {}", path.display()))?;
        if bytes.len() < 12 || &bytes[..8] != MAGIC {
            bail!("{} is not a static embedding table", path.display());
        }
        let header_len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize;
        let header: serde_json::Value = serde_json::from_slice(
            bytes
                .get(12..12 + header_len)
                .context("the table's header is cut short")?,
        )
        .context("parsing the table's header")?;
        if header["pooling"] != POOLING {
            bail!(
                "the table was distilled with other pooling: {}",
                header["pooling"]
            );
        }
        let source = header["source"]
            .as_str()
            .context("the header names no source")?;
        let vocab = header["vocab"]
            .as_u64()
            .context("the header has no vocab")? as usize;
        let dim = header["dim"].as_u64().context("the header has no dim")? as usize;
        let body = &bytes[12 + header_len..];
        if body.len() != vocab * dim * 4 {
            bail!(
                "the table holds {} bytes, not {vocab} × {dim} floats",
                body.len()
            );
        }
        if tokenizer.get_vocab_size(true) != vocab {
            bail!(
                "the table has {vocab} rows but the tokenizer {} tokens",
                tokenizer.get_vocab_size(true)
            );
        }
        let table = crate::models::from_bytes(body);
        StaticModel::from_table(source.to_owned(), dim, vocab, table, tokenizer)
    }

    /// Embed one text: its whole token sequence, no truncation.
    pub fn embed_one(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        let encoding = self
            .tokenizer
            .encode_fast(text, false)
            .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?;
        Ok(self.pool(encoding.get_ids()))
    }

    /// The normalised weighted mean of these tokens' vectors (zeros when none has weight).
    pub fn pool(&self, ids: &[u32]) -> Vec<f32> {
        let mut sum = vec![0f32; self.dim];
        for &id in ids {
            let id = id as usize;
            let Some(&weight) = self.weights.get(id) else {
                continue;
            };
            if weight == 0.0 {
                continue;
            }
            let row = &self.active[id * self.dim..(id + 1) * self.dim];
            sum.iter_mut().zip(row).for_each(|(s, x)| *s += weight * x);
        }
        crate::models::normalise(sum)
    }

    /// Embed a batch of texts, one L2-normalised vector each, in order, spread over the
    /// machine's cores (tokenising is most of the cost).
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(texts.len().max(1));
        if threads <= 1 {
            return texts.iter().map(|t| self.embed_one(t)).collect();
        }
        let per = texts.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = texts
                .chunks(per)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|t| self.embed_one(t))
                            .collect::<anyhow::Result<Vec<_>>>()
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(texts.len());
            for handle in handles {
                out.extend(
                    handle
                        .join()
                        .map_err(|_| anyhow::anyhow!("a static embedding thread panicked"))??,
                );
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::dot;

    fn model_dir() -> PathBuf {
        // The tests run with the model, as CI installs it; a run without it fails here.
        std::env::var_os("MNEME_EMBED_MODEL_DIR")
            .map(PathBuf::from)
            .expect("MNEME_EMBED_MODEL_DIR names the embedding model's directory")
    }

    /// Texts that share words are closer than unrelated ones, long texts are embedded whole
    /// (their end changes the vector), and a saved table loads back identical.
    #[test]
    fn static_table_embeds_and_round_trips() {
        let local = LocalModel::load(&model_dir()).unwrap();
        let query = "the nats jetstream consumer stopped acknowledging messages";
        let related = "why does my jetstream consumer not acknowledge nats messages";
        let unrelated = "she baked a chocolate cake for her grandmother's birthday";
        let tail = "the billing migration failed on staging";
        let mut needed = std::collections::HashSet::new();
        for text in [query, related, unrelated, tail, "cargo test"] {
            let encoding = local.tokenizer().encode(text, false).unwrap();
            needed.extend(encoding.get_ids().iter().copied());
        }
        let model = StaticModel::distil_only(&local, |id| needed.contains(&id)).unwrap();
        assert_eq!(model.dim(), 384);
        let embed = |t: &str| model.embed_one(t).unwrap();
        let (q, r, u) = (embed(query), embed(related), embed(unrelated));
        assert!(
            dot(&q, &r) > dot(&q, &u) + 0.1,
            "related {} unrelated {}",
            dot(&q, &r),
            dot(&q, &u)
        );
        assert!((dot(&q, &q) - 1.0).abs() < 1e-4);

        // Past MiniLM's 256 tokens: truncated, both texts would get one vector; the static
        // embedder still reads the end.
        let long = "cargo test ".repeat(150);
        let longer = format!("{long} {}", [tail; 4].join(" "));
        let cosine = dot(&embed(&long), &embed(&longer));
        assert!(cosine < 0.999, "{cosine}");

        let batch = model
            .embed(&["cargo".to_owned(), query.to_owned()])
            .unwrap();
        assert_eq!(batch[1], q);

        let dir = tempfile::tempdir().unwrap();
        let path = StaticModel::cache_path(dir.path(), model.source());
        model.save(&path).unwrap();
        let again = StaticModel::load(&path, local.tokenizer().clone()).unwrap();
        assert_eq!(again.table(), model.table());
        assert_eq!(again.id(), model.id());
        assert_eq!(again.embed_one(query).unwrap(), q);
    }
}
