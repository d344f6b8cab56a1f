// ablation.cu - a diagnostic: the ops of the groups that KITE_CUDA_ABLATE names (PassRole, by the
// names below, comma-separated) left out of every pass, so that the step's time without them says
// what they cost in the pass as it runs (bench/pass_ablation.py); and with copy_back named, the
// logits' copies back to the host. Built only with KITE_CUDA_ABLATION=ON (KC_ABLATION); such a
// pass computes wrong outputs by design.
#include "device_matrix.cuh"
#include "pass_ops.cuh"

#ifndef KC_ABLATION
#define KC_ABLATION 0
#endif

#if KC_ABLATION
// the groups' names, by PassRole (ROLE_NONE has none: the piece events always stay)
static const char *const role_names[ROLE_COUNT] = {
    "",        "embed",      "norm",       "dn_in",   "dn_head", "dn_out",   "att_qkv",
    "att_prep", "att_scores", "att_values", "att_out", "ffn_up",  "ffn_down", "lm_head",
};

// not a group of ops: the logits' copies back to the host (passes.cu)
static const char copy_back_name[] = "copy_back";
static bool copy_back = false;

bool ablate_copy_back() { return copy_back; }

// The roles named in spec (comma-separated) into drop, copy_back into *copies; false and a message
// for a name unknown.
static bool parse_groups(const char *spec, bool (&drop)[ROLE_COUNT], bool *copies) {
    for (const char *p = spec; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        int found = 0;
        for (int r = 1; r < ROLE_COUNT; r++)
            if (strlen(role_names[r]) == n && strncmp(p, role_names[r], n) == 0) found = r;
        if (found) {
            drop[found] = true;
        } else if (strlen(copy_back_name) == n && strncmp(p, copy_back_name, n) == 0) {
            *copies = true;
        } else {
            fprintf(stderr, "kite_cuda: KITE_CUDA_ABLATE: '%.*s' is not a group of ops; the groups:", (int)n, p);
            for (int r = 1; r < ROLE_COUNT; r++) fprintf(stderr, " %s", role_names[r]);
            fprintf(stderr, " %s\n", copy_back_name);
            return false;
        }
        p = end ? end + 1 : p + n;
    }
    return true;
}

static long long job_bytes(const MatvecJob &J) { return (long long)J.n * type_row_bytes(J.type, J.k); }

// The weight bytes an op reads (its matrices' rows; 0 for the ops without weights).
static long long weight_bytes(const PassOp &o) {
    long long b = 0;
    if (o.kind == OP_GEMV)
        for (int t = 0; t < o.gemv.js.nj; t++) b += job_bytes(o.gemv.js.j[t]);
    else if (o.kind == OP_GEMV_GLU) b = job_bytes(o.glu.gate) + job_bytes(o.glu.up);
    else if (o.kind == OP_LM_HEAD) b = job_bytes(o.lm.w);
    return b;
}
#endif

int32_t ablate_pass(int m, int s, std::vector<PassOp> *ops) {
#if KC_ABLATION
    const char *spec = getenv("KITE_CUDA_ABLATE");
    if (!spec || !*spec) return 0;
    bool drop[ROLE_COUNT] = {};
    if (!parse_groups(spec, drop, &copy_back)) return KCUDA_E_ARG;
    int left_out[ROLE_COUNT] = {}, kernels = 0, pieces = 0;
    long long bytes[ROLE_COUNT] = {};
    size_t kept = 0;
    for (size_t i = 0; i < ops->size(); i++) {
        const PassOp &o = (*ops)[i];
        kernels += o.kind != OP_PIECE_DONE;
        pieces += o.kind == OP_PIECE_DONE;
        if (drop[o.role]) {
            left_out[o.role]++;
            bytes[o.role] += weight_bytes(o);
        } else {
            (*ops)[kept++] = o;
        }
    }
    ops->resize(kept);
    // one line for the M=1 step's plan, which bench/pass_ablation.py reads: its kernels, and by
    // group the ops left out and the weight bytes they read (an op with no group is never left
    // out, so the groups' counts over all the variants add up to the kernels only if every kernel
    // has one); copy_back's are the pieces whose logits are not copied back, and no weights
    if (m == 1 && s == 0) {
        fprintf(stderr, "kite_cuda: ablation: the M=1 pass has %d kernels; left out:", kernels);
        for (int r = 1; r < ROLE_COUNT; r++)
            if (drop[r]) fprintf(stderr, " %s %d %lld", role_names[r], left_out[r], bytes[r]);
        if (copy_back) fprintf(stderr, " %s %d 0", copy_back_name, pieces);
        fprintf(stderr, "\n");
    }
#else
    (void)m;
    (void)s;
    (void)ops;
#endif
    return 0;
}
