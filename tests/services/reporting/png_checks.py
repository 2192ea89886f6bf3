"""Pixel checks on written PNGs, shared by the plot tests: size, not blank, and where a given line colour appears."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.image import imread

MIN_WIDTH, MIN_HEIGHT = 600, 400
"""Smallest figure the plots may produce, in pixels."""


def read_rgb(path: Path) -> np.ndarray:
    """The PNG as an H x W x 3 float array in [0, 1]."""
    image = imread(str(path))
    assert image.ndim == 3 and image.shape[2] in (3, 4), image.shape
    return np.asarray(image[:, :, :3], dtype=np.float64)


def pixels_of_colour(image: np.ndarray, colour: str, tolerance: float = 0.03) -> int:
    """How many pixels are (within `tolerance` per channel) exactly this colour: a drawn line, not the axes."""
    target = np.array(to_rgb(colour))
    return int(np.all(np.abs(image - target) <= tolerance, axis=2).sum())


def distinct_colours(image: np.ndarray) -> int:
    """Number of distinct 8-bit RGB triples in the image."""
    quantised = np.round(image * 255).astype(np.int64)
    packed = (quantised[:, :, 0] << 16) | (quantised[:, :, 1] << 8) | quantised[:, :, 2]  # one int per pixel: fast
    return len(np.unique(packed))


def assert_real_figure(path: Path) -> np.ndarray:
    """The PNG exists, is at least 600x400, and is not blank (many colours, pixels vary). Returns its pixels."""
    assert path.is_file(), f"{path} was not written"
    image = read_rgb(path)
    height, width = image.shape[:2]
    assert width >= MIN_WIDTH and height >= MIN_HEIGHT, (path.name, width, height)
    assert image.std() > 0.05, f"{path.name} looks blank (pixel std {image.std():.4f})"
    assert distinct_colours(image) > 50, f"{path.name} has only {distinct_colours(image)} colours"
    return image
