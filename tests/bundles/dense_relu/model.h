/*
 * model.h: API of the hand-written stand-in bundle picograd's target tests build until the real
 * exporter lands. The interface is the exporter's: element counts as macros, the arena size, and
 * one `model_run` taking the inputs then the outputs, in order.
 *
 * Model: h = relu(W1 x + b1) (8 -> 16), y = W2 h + b2 (16 -> 4), argmax = index of max y.
 */
#ifndef MODEL_H
#define MODEL_H
#include <stdint.h>

#define MODEL_INPUT_X_SIZE 8
#define MODEL_OUTPUT_Y_SIZE 4
#define MODEL_OUTPUT_ARGMAX_SIZE 1
#define MODEL_ARENA_BYTES 64

void model_run(const float *in_x, float *out_y, int32_t *out_argmax);

#endif
