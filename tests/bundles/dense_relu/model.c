/*
 * model.c: kernels and run function of the hand-written stand-in bundle (see model.h). Plain C99,
 * no malloc, no stdio, no libm; one static arena holds the hidden layer. Sums run in index order
 * starting from the bias, so a reference that does the same in f32 matches bit for bit.
 */
#include "model.h"

extern const float model_w1[128];
extern const float model_b1[16];
extern const float model_w2[64];
extern const float model_b2[4];

static float model_arena[MODEL_ARENA_BYTES / sizeof(float)];

static void dense(const float *w, const float *b, const float *x, float *y, int n_out, int n_in,
                  int relu)
{
    int i, j;
    for (i = 0; i < n_out; i++) {
        float acc = b[i];
        for (j = 0; j < n_in; j++) {
            acc += w[i * n_in + j] * x[j];
        }
        y[i] = (relu && acc < 0.0f) ? 0.0f : acc;
    }
}

void model_run(const float *in_x, float *out_y, int32_t *out_argmax)
{
    float *h = model_arena;
    int32_t i, best = 0;
    dense(model_w1, model_b1, in_x, h, 16, 8, 1);
    dense(model_w2, model_b2, h, out_y, 4, 16, 0);
    for (i = 1; i < 4; i++) {
        if (out_y[i] > out_y[best]) {
            best = i;
        }
    }
    out_argmax[0] = best;
}
