"""What a build directory was configured with, for the tool tests that skip what it lacks."""
import os


def built_with_gloo(build):
    """Whether `build`'s memgrad_build_config.h says it has Gloo (CPU ranks)."""
    try:
        with open(os.path.join(build, "memgrad_build_config.h"), encoding="utf-8") as f:
            return "#define MEMGRAD_WITH_GLOO 1" in f.read()
    except OSError:
        return False
