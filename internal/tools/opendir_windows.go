package tools

// openDir is zero: Windows has no O_DIRECTORY, and no FIFOs to block on.
const openDir = 0
