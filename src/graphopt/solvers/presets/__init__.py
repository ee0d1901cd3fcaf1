"""Named solver configurations shipped with the package."""
