// llama.cpp's own cost of the shapes posrecall runs, measured with the
// libraries posrecall links and nothing of posrecall in between: the
// baseline that posrecall's timings are divided by (scripts/gpu/gpu-check), and
// the price of a decode step of K tokens against a step of one (what a
// drafted position costs when drafts are verified).
//
//   llama_timing MODEL CORPUS --depths 6144,32768 --ks 1,2,4,8,16,32 \
//       [--gpu-layers 99] [--kv f16|q8_0] [--reps 5] [--gen 128] [--threads N]
//
// For each depth D, from a cleared context: D tokens of CORPUS (tokenized,
// repeated if short) are evaluated in batches of 512 (posrecall's batch and
// micro-batch), logits for the last only, twice (the first prefill of a
// process pays for first use); then steps of K tokens at positions
// D..D+K-1 with logits for every one of them (a verifying step needs all K),
// each removed from the cache again: R of each K in a row (steady), then R
// rounds over the Ks (alternating shapes); then G single-token steps one
// after the other (generation at depth D). Every timed call ends with llama_synchronize, so a GPU's queue is
// drained inside the timing. One JSON object a line on stdout.
//
// Built by scripts/gpu/gpu-pack (against the CUDA build's libllama.so) and by
// scripts/gpu/gpu-check --dry-run (against the CPU build's static libraries).
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

static std::vector<int> parse_list(const char * s) {
    std::vector<int> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        out.push_back(std::atoi(item.c_str()));
    }
    return out;
}

[[noreturn]] static void die(const std::string & msg) {
    std::fprintf(stderr, "llama_timing: %s\n", msg.c_str());
    std::exit(1);
}

static void quiet_log(ggml_log_level, const char *, void *) {}

// Removes the step just timed; a model whose memory cannot drop the last
// positions (recurrent state) cannot be measured this way.
static void undo(llama_memory_t mem, int depth) {
    if (!llama_memory_seq_rm(mem, 0, depth, -1)) {
        die("this model's memory cannot remove a step again (recurrent or hybrid): use a transformer");
    }
}

// One decode of `tokens` at positions pos.., logits for the last only or for
// every token; false when llama.cpp refuses it.
static bool decode(llama_context * ctx, llama_batch & batch, const int * tokens, int n, int pos, bool all_logits) {
    batch.n_tokens = n;
    for (int i = 0; i < n; i++) {
        batch.token[i]     = tokens[i];
        batch.pos[i]       = pos + i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = all_logits || i == n - 1;
    }
    return llama_decode(ctx, batch) == 0;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        die("usage: llama_timing MODEL CORPUS --depths D,.. --ks K,.. [--gpu-layers N] [--kv f16|q8_0] [--reps R] [--gen G] [--threads T]");
    }
    const char * model_path  = argv[1];
    const char * corpus_path = argv[2];
    std::vector<int> depths = { 6144 };
    std::vector<int> ks     = { 1, 2, 4, 8, 16, 32 };
    int gpu_layers = 0, reps = 5, gen = 128, threads = 0;
    std::string kv = "f16";
    for (int i = 3; i < argc; i++) {
        std::string a = argv[i];
        if (i + 1 >= argc) {
            die("missing value for " + a);
        }
        const char * v = argv[++i];
        if (a == "--depths") depths = parse_list(v);
        else if (a == "--ks") ks = parse_list(v);
        else if (a == "--gpu-layers") gpu_layers = std::atoi(v);
        else if (a == "--kv") kv = v;
        else if (a == "--reps") reps = std::atoi(v);
        else if (a == "--gen") gen = std::atoi(v);
        else if (a == "--threads") threads = std::atoi(v);
        else die("unknown argument " + a);
    }
    ggml_type type_kv;
    if (kv == "f16") type_kv = GGML_TYPE_F16;
    else if (kv == "q8_0") type_kv = GGML_TYPE_Q8_0;
    else if (kv == "q4_0") type_kv = GGML_TYPE_Q4_0;
    else die("--kv must be f16, q8_0 or q4_0");
    if (depths.empty() || ks.empty() || reps < 1 || gen < 1) {
        die("--depths, --ks, --reps and --gen need positive values");
    }
    const int max_k = *std::max_element(ks.begin(), ks.end());
    const int max_d = *std::max_element(depths.begin(), depths.end());

    if (!std::getenv("POSRECALL_LLAMA_LOG")) {
        llama_log_set(quiet_log, nullptr);
    }
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = gpu_layers;
    llama_model * model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        die(std::string("cannot load ") + model_path);
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::ifstream in(corpus_path, std::ios::binary);
    if (!in) {
        die(std::string("cannot read ") + corpus_path);
    }
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<llama_token> corpus(text.size() + 16);
    int n = llama_tokenize(vocab, text.c_str(), (int) text.size(), corpus.data(), (int) corpus.size(), false, true);
    if (n <= 0) {
        die("the corpus tokenized to nothing");
    }
    corpus.resize(n);
    // As many tokens as the deepest step reaches, the corpus repeated if short.
    const int need = max_d + std::max(max_k, gen) + 1;
    std::vector<llama_token> tokens(need);
    for (int i = 0; i < need; i++) {
        tokens[i] = corpus[i % corpus.size()];
    }

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) (need + 256);
    cp.n_batch         = 512;
    cp.n_ubatch        = 512;
    cp.n_seq_max       = 1;
    cp.type_k          = type_kv;
    cp.type_v          = type_kv;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    if (threads > 0) {
        cp.n_threads       = threads;
        cp.n_threads_batch = threads;
    }
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        die("cannot create a context of " + std::to_string(cp.n_ctx) + " tokens");
    }
    llama_memory_t mem = llama_get_memory(ctx);
    llama_batch batch = llama_batch_init(std::max(512, max_k), 0, 1);

    // Where the offloaded layers went: the first GPU llama.cpp registered.
    std::string device = "CPU";
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (gpu_layers > 0 && ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_GPU) {
            device = std::string(ggml_backend_dev_name(d)) + " (" + ggml_backend_dev_description(d) + ")";
            break;
        }
    }
    std::printf("{\"what\":\"setup\",\"device\":\"%s\",\"kv\":\"%s\",\"n_ctx\":%u,\"gpu_layers\":%d,\"corpus_tokens\":%d}\n",
                device.c_str(), kv.c_str(), cp.n_ctx, gpu_layers, n);
    std::fflush(stdout);

    for (int depth : depths) {
        // Twice: the first prefill of a process pays for what a first use
        // sets up (as posrecall's one prefill does), the second does not.
        double prefill[2];
        for (double & ms : prefill) {
            llama_memory_clear(mem, true);
            double t0 = now_ms();
            for (int p = 0; p < depth; p += 512) {
                int m = std::min(512, depth - p);
                if (!decode(ctx, batch, tokens.data() + p, m, p, false)) {
                    die("prefill failed at position " + std::to_string(p));
                }
            }
            llama_synchronize(ctx);
            ms = now_ms() - t0;
        }
        std::printf("{\"what\":\"prefill\",\"depth\":%d,\"ms\":%.3f,\"tok_s\":%.1f,\"ms_again\":%.3f,\"tok_s_again\":%.1f}\n",
                    depth, prefill[0], depth / prefill[0] * 1e3, prefill[1], depth / prefill[1] * 1e3);
        std::fflush(stdout);

        // One untimed step first: the first step at a new shape allocates.
        for (int k : ks) {
            if (!decode(ctx, batch, tokens.data() + depth, k, depth, true)) {
                die("a step of " + std::to_string(k) + " tokens failed");
            }
            llama_synchronize(ctx);
            undo(mem, depth);
        }
        // One timed step of k tokens at the depth, removed again.
        auto step = [&](int k) {
            double t = now_ms();
            if (!decode(ctx, batch, tokens.data() + depth, k, depth, true)) {
                die("a step of " + std::to_string(k) + " tokens failed");
            }
            llama_synchronize(ctx);
            // Read every position's logits, as a verifying step does.
            float acc = 0;
            for (int i = 0; i < k; i++) {
                acc += llama_get_logits_ith(ctx, i)[0];
            }
            double ms = now_ms() - t;
            if (acc != acc) {
                std::fprintf(stderr, "llama_timing: note: NaN logits at K=%d\n", k);
            }
            undo(mem, depth);
            return ms;
        };
        auto median = [](std::vector<double> v) {
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        // Steady: R steps of one size in a row (a GPU reuses the step's
        // graph, as one token per step always can); alternating: the sizes
        // round-robin, so that every step has another shape than the last,
        // as drafts of varying length give.
        std::vector<std::vector<double>> steady(ks.size()), alternating(ks.size());
        for (size_t j = 0; j < ks.size(); j++) {
            for (int r = 0; r < reps; r++) {
                steady[j].push_back(step(ks[j]));
            }
        }
        for (int r = 0; r < reps; r++) {
            for (size_t j = 0; j < ks.size(); j++) {
                alternating[j].push_back(step(ks[j]));
            }
        }
        for (size_t j = 0; j < ks.size(); j++) {
            std::printf("{\"what\":\"step\",\"depth\":%d,\"k\":%d,\"ms_median\":%.4f,\"ms_alternating\":%.4f,\"reps\":%d}\n",
                        depth, ks[j], median(steady[j]), median(alternating[j]), reps);
        }
        std::fflush(stdout);

        double t0 = now_ms();
        for (int i = 0; i < gen; i++) {
            if (!decode(ctx, batch, tokens.data() + depth + i, 1, depth + i, true)) {
                die("generation failed");
            }
            llama_synchronize(ctx);
            (void) llama_get_logits_ith(ctx, 0);
        }
        double g = now_ms() - t0;
        undo(mem, depth);
        std::printf("{\"what\":\"generate\",\"depth\":%d,\"tokens\":%d,\"ms\":%.3f,\"ms_per_token\":%.4f,\"tok_s\":%.1f}\n",
                    depth, gen, g, g / gen, gen / g * 1e3);
        std::fflush(stdout);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
