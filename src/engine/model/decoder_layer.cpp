// One decoder layer (docs/qwen4_exp.md §3.2), for every backend: PLE, attention-side
// hyper-connection, the token mixer (GDN or QSA), MLP-side hyper-connection and MoE.
#include <string>

#include "engine/model/composed_model.h"

namespace cherenkov::engine {

void compose_decoder_layer(ForwardPass& pass, const LayerWeights& weights, LayerRef layer,
                           const LayerRef* next, std::string trace_prefix, float* x, int64_t n_rows,
                           const model_data::qwen4_exp::Config& config) {
    const int64_t h = config.hidden_size;
    const int64_t n_streams = config.hc_count;
    const int64_t width = config.hc_width();
    pass.begin_layer(layer, std::move(trace_prefix));
    float* mix = pass.layer_array(n_rows * h);
    float* inject = pass.layer_array(n_rows * n_streams);
    float* y = pass.layer_array(n_rows * h);
    // Decided before anything of the layer is queued: a block the backend can route by itself
    // keeps the whole layer inside one capture region.
    const MoePath moe = pass.moe_path();
    // Everything up to the MoE's routing read-back (or the whole layer): no host decision
    // depends on data in between.
    pass.layer_region(x, [&] {
        if (weights.ple) pass.ple(x);
        pass.mix(Mixer::Attention, x, n_rows, mix, inject);
        pass.record("attn_hc.mix", mix, n_rows * h);
        pass.record("attn_hc.inject", inject, n_rows * n_streams);
        pass.token_mixer(mix, y);
        pass.record("mixer_out", y, n_rows * h);
        pass.combine(x, inject, y);
        pass.record("x_mid", x, n_rows * width);

        pass.mix(Mixer::Mlp, x, n_rows, mix, inject);
        pass.record("mlp_hc.mix", mix, n_rows * h);
        pass.record("mlp_hc.inject", inject, n_rows * n_streams);
        if (moe == MoePath::Device) {
            pass.moe_on_device(mix, y, x, inject);
        } else {
            pass.moe_route(mix, next);
        }
    });
    if (moe == MoePath::Host) pass.moe_finish(mix, next, y, x, inject);
    pass.record("x_out", x, n_rows * width);
    pass.end_layer();
}

}  // namespace cherenkov::engine
