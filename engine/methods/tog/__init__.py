"""Think-on-Graph (Sun et al., ICLR 2024): `tog` and `tog-r`, in method.py."""
