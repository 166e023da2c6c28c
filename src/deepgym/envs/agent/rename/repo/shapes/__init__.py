"""Shapes and their areas."""

from shapes.area import calc_area

__all__ = ["calc_area"]
