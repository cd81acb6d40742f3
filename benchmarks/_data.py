"""Data helpers shared by the benchmark scripts: the shared LIBSVM files, cached, and leukemia.

Where the data are
    ``$TORCHFW_DATA`` if set, else ``../shared/data`` next to the repository (the layout of the
    project checkout). Files are stored xz-compressed (``a9a.xz``); a decompressed copy with the
    plain name is used when that is what the folder holds.

Parsing cache
    :func:`load_libsvm` and :func:`load_svmlight_cached` keep the parsed CSR arrays in
    ``$TORCHFW_CACHE``, else ``$XDG_CACHE_HOME/torchfw``, else ``~/.cache/torchfw`` (never in the
    repository), as uncompressed ``.npz`` files keyed by the source file's name, size and
    modification time, so repeated benchmark runs skip decompression and parsing, and a changed
    source file is parsed again. Values are cached in float64, so every ``dtype`` can be served
    from one entry. Delete the folder to clear the cache.

Usage from a benchmark script in this folder::

    from _data import load_libsvm, load_leukemia
    d = load_libsvm("a9a")                      # d.X_train, d.y_train, d.X_test, d.y_test
    X, y = load_leukemia(standardize=True)      # 72 x 7129, y = +1 (AML) / -1 (ALL)
"""

from __future__ import annotations

import os as _os

# Benchmarks time the compiled kernels: the cold-start fallback (the PyTorch paths while
# numba's cache is cold, torchfw.utils.cold_start) is what first_fit.py measures, alone.
_os.environ.setdefault("TORCHFW_COLD_START", "compile")

import csv
import hashlib
import io
import lzma
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

try:
    import torchfw  # noqa: F401
except ImportError:  # running from a checkout without an install: use the repository copy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torchfw.datasets import load_svmlight, load_svmlight_files

__all__ = [
    "DATASETS",
    "LibsvmSplit",
    "cache_dir",
    "data_dir",
    "dataset_path",
    "load_leukemia",
    "load_libsvm",
    "load_libsvm_pair",
    "load_svmlight_cached",
]

_CACHE_VERSION = 1  # bump when the cached layout or the parser's output changes


@dataclass(frozen=True)
class _Spec:
    train: str
    test: str | None
    n_features: int
    task: str  # "binary", "multiclass" or "regression"


# Feature counts are the ones published on the LIBSVM data pages (and checked in
# ../shared/data/README.md); passing them keeps train and test matrices the same width even when
# a split does not use the highest feature (a9a.t stops at 122).
DATASETS: dict[str, _Spec] = {
    "a9a": _Spec("a9a", "a9a.t", 123, "binary"),
    "w8a": _Spec("w8a", "w8a.t", 300, "binary"),
    "mushrooms": _Spec("mushrooms", None, 112, "binary"),
    "svmguide1": _Spec("svmguide1", "svmguide1.t", 4, "binary"),
    "madelon.t": _Spec("madelon.t", None, 500, "binary"),
    "ijcnn1.val": _Spec("ijcnn1.val", None, 22, "binary"),
    "letter.scale": _Spec("letter.scale", "letter.scale.t", 16, "multiclass"),
    "letter.scale.tr": _Spec("letter.scale.tr", "letter.scale.val", 16, "multiclass"),
    "satimage.scale": _Spec("satimage.scale", "satimage.scale.t", 36, "multiclass"),
    "dna.scale": _Spec("dna.scale", "dna.scale.t", 180, "multiclass"),
    "pendigits": _Spec("pendigits", "pendigits.t", 16, "multiclass"),
    "usps.t": _Spec("usps.t", None, 256, "multiclass"),
    "sector.scale": _Spec("sector.scale", "sector.t.scale", 55197, "multiclass"),
    "shuttle.scale.t": _Spec("shuttle.scale.t", None, 9, "multiclass"),
    "news20": _Spec("news20", None, 62061, "multiclass"),
    "glass.scale": _Spec("glass.scale", None, 9, "multiclass"),
    "segment.scale": _Spec("segment.scale", None, 19, "multiclass"),
    "vehicle.scale": _Spec("vehicle.scale", None, 18, "multiclass"),
    "vowel.scale": _Spec("vowel.scale", None, 10, "multiclass"),
    "wine.scale": _Spec("wine.scale", None, 13, "multiclass"),
    "svmguide2": _Spec("svmguide2", None, 20, "multiclass"),
    "housing_scale": _Spec("housing_scale", None, 13, "regression"),
    "abalone_scale": _Spec("abalone_scale", None, 8, "regression"),
}

# Short names people type.
_ALIASES = {
    "letter": "letter.scale", "satimage": "satimage.scale", "dna": "dna.scale",
    "sector": "sector.scale", "ijcnn1": "ijcnn1.val", "madelon": "madelon.t", "usps": "usps.t",
    "shuttle": "shuttle.scale.t", "glass": "glass.scale", "segment": "segment.scale",
    "vehicle": "vehicle.scale", "vowel": "vowel.scale", "wine": "wine.scale",
    "housing": "housing_scale", "abalone": "abalone_scale",
}


def data_dir() -> Path:
    """The folder holding the shared datasets: ``$TORCHFW_DATA`` or ``../shared/data``.

    Returns
    -------
    pathlib.Path
        The folder (not checked for existence; :func:`dataset_path` does that).
    """
    env = os.environ.get("TORCHFW_DATA")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def cache_dir() -> Path:
    """The parsing cache folder: ``$TORCHFW_CACHE``, ``$XDG_CACHE_HOME/torchfw`` or
    ``~/.cache/torchfw``.

    Returns
    -------
    pathlib.Path
        The folder (created on first write).
    """
    env = os.environ.get("TORCHFW_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "torchfw"


def dataset_path(filename: str) -> Path:
    """Locate a file of the data folder, preferring the stored ``.xz`` copy.

    Parameters
    ----------
    filename : str
        The file's name without compression suffix, e.g. ``"a9a.t"``.

    Returns
    -------
    pathlib.Path
        ``data_dir() / (filename + ".xz")`` if it exists, else ``data_dir() / filename``.

    Raises
    ------
    FileNotFoundError
        If neither exists; the message names the folder and how to point elsewhere.
    """
    if not isinstance(filename, str) or not filename:
        raise TypeError(f"filename must be a non-empty string, got {filename!r}")
    folder = data_dir()
    for candidate in (folder / f"{filename}.xz", folder / filename):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"dataset file {filename!r} (or {filename + '.xz'!r}) not found in {folder}; set "
        f"TORCHFW_DATA to the folder that holds the LIBSVM files"
    )


def _cache_file(source: Path, n_features, zero_based) -> Path:
    stat = source.stat()
    where = hashlib.sha1(str(source.resolve()).encode()).hexdigest()[:10]
    key = (f"{source.name}-{stat.st_size}-{stat.st_mtime_ns}-{where}-nf{n_features}"
           f"-zb{zero_based}-v{_CACHE_VERSION}.npz")
    return cache_dir() / key


def _read_cache(path: Path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return (z["indptr"], z["indices"], z["data"], z["y"],
                    tuple(int(s) for s in z["shape"]))
    except (OSError, KeyError, ValueError):
        return None  # missing or damaged entry: parse again


def _write_cache(path: Path, indptr, indices, data, y, shape) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write to a temporary file and rename it into place, so that concurrent benchmark runs
        # never read a half-written entry.
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, indptr=indptr, indices=indices, data=data, y=y,
                     shape=np.asarray(shape, dtype=np.int64))
        os.replace(tmp, path)
    except OSError as exc:
        warnings.warn(f"could not write the dataset cache {path}: {exc}", stacklevel=3)


def _tensors(indptr, indices, data, y, shape, dtype, device):
    with warnings.catch_warnings():
        # torch warns once per process that sparse CSR support is in beta: noise here.
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly")
        X = torch.sparse_csr_tensor(
            torch.from_numpy(indptr.astype(np.int64, copy=False)),
            torch.from_numpy(indices.astype(np.int64, copy=False)),
            torch.from_numpy(data).to(dtype), size=shape,
            check_invariants=False,  # the arrays come from torchfw's own validated parser
        )
    y = torch.from_numpy(y)
    if device is not None:
        X, y = X.to(device), y.to(device)
    return X, y


def load_svmlight_cached(filename, *, n_features=None, zero_based=False, dtype=torch.float32,
                         device=None, cache=True):
    """Load one file of the data folder (or any path) through the parsing cache.

    Parameters
    ----------
    filename : str or os.PathLike
        A name in :func:`data_dir` (``"a9a.t"``, resolved by :func:`dataset_path`) or a path to
        an existing file.
    n_features : int, optional
        Passed to :func:`torchfw.datasets.load_svmlight`.
    zero_based : bool or "auto", default False
        LIBSVM files are one-based; see :func:`torchfw.datasets.load_svmlight`.
    dtype : torch.dtype, default torch.float32
        Values dtype of the returned matrix.
    device : str or torch.device, optional
    cache : bool, default True
        Read and write the cache; ``False`` always parses (and writes nothing).

    Returns
    -------
    X : torch.Tensor
        ``torch.sparse_csr_tensor`` (int64 indices).
    y : torch.Tensor
        float64 labels.
    """
    source = Path(filename)
    if not source.is_file():
        source = dataset_path(str(filename))
    entry = _cache_file(source, n_features, zero_based) if cache else None
    hit = _read_cache(entry) if entry is not None and entry.is_file() else None
    if hit is None:
        X, y = load_svmlight(source, n_features=n_features, dtype=torch.float64,
                             zero_based=zero_based)
        hit = (X.crow_indices().numpy(), X.col_indices().numpy(), X.values().numpy(), y.numpy(),
               tuple(X.shape))
        if entry is not None:
            indices = hit[1]
            if hit[4][1] < 2**31:
                indices = indices.astype(np.int32)  # half the bytes to read back
            _write_cache(entry, hit[0], indices, hit[2], hit[3], hit[4])
    return _tensors(*hit, dtype=dtype, device=device)


@dataclass
class LibsvmSplit:
    """A named LIBSVM dataset: train matrix and labels, and the test split when there is one.

    Attributes
    ----------
    name : str
        Canonical name (a key of :data:`DATASETS`).
    X_train, y_train : torch.Tensor
        CSR matrix and float64 labels.
    X_test, y_test : torch.Tensor or None
        Same for the official test split (``None`` when the data set has none here).
    n_features : int
    task : str
        ``"binary"``, ``"multiclass"`` or ``"regression"``.
    """

    name: str
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor | None
    y_test: torch.Tensor | None
    n_features: int
    task: str


def load_libsvm(name, *, dtype=torch.float32, device=None, cache=True) -> LibsvmSplit:
    """Load a named data set of the shared folder (train and test splits), through the cache.

    Parameters
    ----------
    name : str
        A key of :data:`DATASETS` (``"a9a"``, ``"w8a"``, ``"dna.scale"``, ``"satimage.scale"``,
        ``"letter.scale"``, ``"sector.scale"``, ``"ijcnn1.val"``, ``"svmguide1"``,
        ``"pendigits"``, ``"housing_scale"``, ...) or a short alias (``"dna"``, ``"letter"``,
        ``"sector"``, ``"ijcnn1"``, ``"housing"``, ...).
    dtype : torch.dtype, default torch.float32
    device : str or torch.device, optional
    cache : bool, default True
        Use the on-disk parsing cache (see the module docstring).

    Returns
    -------
    LibsvmSplit
        Both matrices have the published number of features.

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).
    FileNotFoundError
        If the files are not in :func:`data_dir`.
    """
    key = _ALIASES.get(name, name)
    if key not in DATASETS:
        known = ", ".join(sorted(set(DATASETS) | set(_ALIASES)))
        raise KeyError(f"unknown dataset {name!r}; known: {known}")
    spec = DATASETS[key]
    kwargs = dict(n_features=spec.n_features, zero_based=False, dtype=dtype, device=device,
                  cache=cache)
    X_train, y_train = load_svmlight_cached(spec.train, **kwargs)
    X_test = y_test = None
    if spec.test is not None:
        X_test, y_test = load_svmlight_cached(spec.test, **kwargs)
    return LibsvmSplit(key, X_train, y_train, X_test, y_test, spec.n_features, spec.task)


def load_libsvm_pair(train, test, *, dtype=torch.float32, device=None):
    """Load any train/test pair of files with a common feature count (no cache).

    A thin wrapper of :func:`torchfw.datasets.load_svmlight_files` that resolves names in
    :func:`data_dir`; use it for files that are not in :data:`DATASETS`.

    Parameters
    ----------
    train, test : str or os.PathLike
        Names in the data folder or paths.
    dtype : torch.dtype, default torch.float32
    device : str or torch.device, optional

    Returns
    -------
    X_train, y_train, X_test, y_test : torch.Tensor
    """
    paths = [p if Path(p).is_file() else dataset_path(str(p)) for p in (train, test)]
    return tuple(load_svmlight_files(paths, dtype=dtype, device=device))


def _read_csv_xz(path: Path) -> list[list[str]]:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rb") as f:
        text = io.TextIOWrapper(f, encoding="utf-8", newline="")
        return [row for row in csv.reader(text) if row]


def _golub_matrix(path: Path) -> tuple[list[int], np.ndarray, list[str], list[str]]:
    """Patient ids (column order of the file), genes x samples matrix, accessions, names."""
    rows = _read_csv_xz(path)
    header = rows[0]
    if header[:2] != ["Gene Description", "Gene Accession Number"]:
        raise ValueError(f"{path.name}: unexpected header {header[:2]}; expected the Golub "
                         f"et al. layout ('Gene Description', 'Gene Accession Number', ...)")
    # Columns alternate: a patient id, then that sample's Affymetrix call (P/A/M), ignored.
    columns = [j for j, h in enumerate(header) if h.strip().isdigit()]
    ids = [int(header[j]) for j in columns]
    body = rows[1:]
    for k, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"{path.name}: line {k}: {len(row)} fields, expected {len(header)}")
    values = np.array([[float(row[j]) for j in columns] for row in body], dtype=np.float64)
    return ids, values, [row[1] for row in body], [row[0] for row in body]


def load_leukemia(*, standardize=True, labels="pm1", dtype=torch.float64, device=None,
                  return_genes=False):
    """The Golub et al. (1999) leukemia data: 72 patients x 7129 gene expression levels.

    The train (38 patients) and independent (34 patients) CSV files are merged and the rows
    put in patient-id order (1..72; the files list their columns in another order). These are
    the samples and genes of LIBSVM's ``leu``/``leu.t``; LIBSVM additionally normalises each
    sample before each feature, which this loader does not do.

    Parameters
    ----------
    standardize : bool, default True
        Center every gene to mean 0 and scale it to unit variance over the 72 patients
        (population variance, ``ddof=0``). Genes with zero variance are only centered (they
        become all-zero columns) rather than divided by zero.
    labels : {"pm1", "01"}, default "pm1"
        ``"pm1"``: ``y = +1`` for AML and ``-1`` for ALL (for SVMs and signed Lasso targets);
        ``"01"``: ``y = 1`` for AML and ``0`` for ALL.
    dtype : torch.dtype, default torch.float64
        dtype of ``X`` and ``y``.
    device : str or torch.device, optional
    return_genes : bool, default False
        Also return the gene accession numbers and descriptions (column order of ``X``).

    Returns
    -------
    X : torch.Tensor
        Dense ``(72, 7129)``; row ``i`` is patient ``i + 1``.
    y : torch.Tensor
        ``(72,)``: 47 ALL and 25 AML patients, encoded as ``labels`` says.
    genes : tuple of (list of str, list of str)
        Only with ``return_genes=True``: accession numbers and descriptions.

    Raises
    ------
    FileNotFoundError
        If the CSV files are not in :func:`data_dir`.
    ValueError
        If the files do not have the expected layout (ids 1..72, the same genes in both).
    """
    if labels not in ("pm1", "01"):
        raise ValueError(f"labels must be 'pm1' or '01', got {labels!r}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    ids_a, X_a, acc_a, desc_a = _golub_matrix(dataset_path("leukemia_golub_train.csv"))
    ids_b, X_b, acc_b, _ = _golub_matrix(dataset_path("leukemia_golub_independent.csv"))
    if acc_a != acc_b:
        raise ValueError("the train and independent leukemia files list different genes")
    ids = np.array(ids_a + ids_b)
    if sorted(ids.tolist()) != list(range(1, 73)):
        raise ValueError(f"expected patient ids 1..72 across the two files, got {sorted(ids)}")
    X = np.concatenate([X_a, X_b], axis=1).T[np.argsort(ids)]  # samples in patient-id order

    table = _read_csv_xz(dataset_path("leukemia_golub_labels.csv"))
    if table[0] != ["patient", "cancer"]:
        raise ValueError(f"unexpected header in the leukemia labels file: {table[0]}")
    cancer = {int(p): c.strip() for p, c in table[1:]}
    if sorted(cancer) != list(range(1, 73)) or set(cancer.values()) != {"ALL", "AML"}:
        raise ValueError("the leukemia labels file must give ALL or AML for patients 1..72")
    negative = -1.0 if labels == "pm1" else 0.0
    y = np.array([1.0 if cancer[p] == "AML" else negative for p in range(1, 73)])

    if standardize:
        X = X - X.mean(axis=0)
        std = X.std(axis=0)
        X /= np.where(std > 0, std, 1.0)
    X_t = torch.from_numpy(np.ascontiguousarray(X)).to(dtype)
    y_t = torch.from_numpy(y).to(dtype)
    if device is not None:
        X_t, y_t = X_t.to(device), y_t.to(device)
    if return_genes:
        return X_t, y_t, (acc_a, desc_a)
    return X_t, y_t
