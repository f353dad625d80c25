"""Face swapping: the `mesh` swapper (a dense warp of the source face onto the target's face mesh,
colour matched and blended; no learned swap weights)."""

from pipeline.swap.mesh_swapper import MeshSwapper, SwapResult
from pipeline.swap.source import SourceFace, analyse_source

__all__ = ["MeshSwapper", "SourceFace", "SwapResult", "analyse_source"]
