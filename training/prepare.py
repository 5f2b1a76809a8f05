"""The first step of training: from site-packages folders to the files the phases read, in one folder.

corpus.json     every package found: version, licence as stated, taken or not, train or held-out, files, bytes
tokenizer.json  the BPE, trained on the start of the training documents (TOKENIZER_SAMPLE_BYTES of them: the
                documents are in content-hash order, so that is a sample of every package)
train.tokens    the training documents' tokens, one stream (corpus.py), each document ended by <|endoftext|>
heldout.tokens  the held-out packages' tokens, the same way
settings.json   the model shape ("builtin", or "smoke": the toy pipeline for tests)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer

from warpcode.training.corpus import Package, find_packages, pack_tokens, split_documents
from warpcode.training.model_config import SHAPES
from warpcode.training.tokenizer import END_OF_TEXT, train_tokenizer

TOKENIZER_SAMPLE_BYTES = 100_000_000
ENCODE_CHUNK = 1000  # documents encoded at once (tokenizers spreads a batch over every core)


def prepare(
    site_packages: list[Path], out: Path, shape: str = "builtin", tokenizer_file: Path | None = None, log=print
) -> dict:
    """Fills `out`; with `tokenizer_file` (an earlier prepare's tokenizer.json) that tokenizer is used as it is, so
    the token streams of another machine's packages are in the vocabulary a model was already trained on."""
    out.mkdir(parents=True, exist_ok=True)
    if missing := [str(folder) for folder in site_packages if not folder.is_dir()]:
        raise FileNotFoundError(f"no such site-packages folder: {', '.join(missing)}")
    packages = find_packages(site_packages)
    documents = split_documents(packages)
    if not documents.train or not documents.heldout:
        raise ValueError(
            f"{len(documents.train)} training and {len(documents.heldout)} held-out documents in "
            f"{', '.join(map(str, site_packages))}: both are needed (add site-packages folders with more packages)"
        )
    log(f"{len(documents.train)} training documents, {len(documents.heldout)} held-out")
    if tokenizer_file is not None:
        tokenizer, size = _given_tokenizer(tokenizer_file, SHAPES[shape].vocab_size), 0
        log(f"tokenizer: {tokenizer_file}, {tokenizer.get_vocab_size()} tokens")
    else:
        sample, size = [], 0
        for text in documents.train:
            if size >= TOKENIZER_SAMPLE_BYTES:
                break
            sample.append(text)
            size += len(text)
        tokenizer = train_tokenizer(sample, SHAPES[shape].vocab_size)
        log(f"tokenizer: {tokenizer.get_vocab_size()} tokens, trained on {size / 1e6:.1f} MB")
    tokenizer.save(str(out / "tokenizer.json"))
    tokenizer.encode_special_tokens = True  # a file's "<|im_end|>" is text, as control tokens are at inference
    separator = tokenizer.token_to_id(END_OF_TEXT)
    tokens = {
        split: pack_tokens(_encoded(tokenizer, texts), separator, out / f"{split}.tokens")
        for split, texts in (("train", documents.train), ("heldout", documents.heldout))
    }
    manifest = {
        "site_packages": [str(folder) for folder in site_packages],
        "documents": {"train": len(documents.train), "heldout": len(documents.heldout)},
        "bytes": {"train": sum(map(len, documents.train)), "heldout": sum(map(len, documents.heldout))},
        "tokens": tokens,
        "tokenizer_sample_bytes": size,  # 0: the tokenizer was given
        "tokenizer_given": str(tokenizer_file) if tokenizer_file else None,
        "packages": [_describe(p) for p in packages],
    }
    (out / "corpus.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "settings.json").write_text(json.dumps({"shape": shape}) + "\n")
    log(f"tokens: {tokens['train']:,} training, {tokens['heldout']:,} held-out")
    return manifest


def _given_tokenizer(path: Path, vocab_size: int) -> Tokenizer:
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer file {path}")
    tokenizer = Tokenizer.from_file(str(path))
    if tokenizer.get_vocab_size() != vocab_size or tokenizer.token_to_id(END_OF_TEXT) is None:
        raise ValueError(f"{path} has {tokenizer.get_vocab_size()} tokens, not this shape's {vocab_size} with "
                         f"{END_OF_TEXT}: give a tokenizer.json written by `prepare` for the same shape")  # fmt: skip
    return tokenizer


def _encoded(tokenizer: Tokenizer, texts: list[str]) -> Iterator[list[int]]:
    for start in range(0, len(texts), ENCODE_CHUNK):
        for encoding in tokenizer.encode_batch(texts[start : start + ENCODE_CHUNK], add_special_tokens=False):
            yield encoding.ids


def _describe(package: Package) -> dict:
    return {
        "name": package.name,
        "version": package.version,
        "license": package.license,
        "taken": package.permissive,
        "split": package.split,
        "files": len(package.files),
    }
