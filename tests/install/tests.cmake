# The installed tree, the exported CMake package and the Spack recipe (registered below).
