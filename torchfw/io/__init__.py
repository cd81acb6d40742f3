"""Reading data files (the LIBSVM / svmlight text format).

One concern: file formats. :mod:`torchfw.io.svmlight` holds the reader; data generators and
SciPy interoperability live in :mod:`torchfw.datasets`, which re-exports the readers.
"""

from .svmlight import load_svmlight, load_svmlight_files

__all__ = ["load_svmlight", "load_svmlight_files"]
