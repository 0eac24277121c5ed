"""Tokenizers: byte-level BPE training (`train_bpe`), encoding (`BPETokenizer`) and the Hugging Face classes."""

from .bpe import BPETokenizer
from .bpe_train import train_bpe, train_bpe_from_counts
from .pretokenize import EOS_TOKEN
from .tokenization_tinylm import TinyLMTokenizer
from .tokenization_tinylm_fast import TinyLMTokenizerFast
from .train_tokenizer import build_hf_tokenizer, train_tokenizer

__all__ = [
    "EOS_TOKEN",
    "BPETokenizer",
    "TinyLMTokenizer",
    "TinyLMTokenizerFast",
    "build_hf_tokenizer",
    "train_bpe",
    "train_bpe_from_counts",
    "train_tokenizer",
]
