// The engine's one-launch expert kernel (src/engine/cuda/expert_layer_imma.cuh) with its
// %globaltimer stamps per block compiled in (Params::trace, stamp), for 03_expert_int8_probe's
// timeline; docs/notes/gemv-attempts.md has what was measured with it.
#pragma once

#define CHERENKOV_EXPERT_LAYER_TRACE
#include "engine/cuda/expert_layer_imma.cuh"
