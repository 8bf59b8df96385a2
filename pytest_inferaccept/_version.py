"""The plugin's version, in a module of its own so that a room can name it without importing the
package facade (which re-exports every room, and so sits above them all)."""

from __future__ import annotations

__version__ = "0.1.0"
