import base64
import sys

import jax

jax.config.update("jax_enable_x64", True)  # the check runs in float64

import bijx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from flax import nnx  # noqa: E402


def decode(text):
    """float64 values stored as base64 of their little-endian bytes (exact)."""
    return np.frombuffer(base64.b64decode(text), dtype="<f8").copy()
