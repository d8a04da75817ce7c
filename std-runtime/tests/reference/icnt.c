/* Reference counter, copied unchanged below this comment from ../shared/tools/qemu-icount/icnt.c
 * (the tool issue 15's peer figures were counted with): the independent check of picograd's own
 * plugin (targets/common/icount.c) in std-runtime/tests/icount.rs. Do not edit. */
// QEMU TCG plugin: total guest insns executed. API_VERSION: 1 for QEMU 7.2, 2..4 for QEMU 10.0
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
typedef uint64_t id_t_; struct qemu_plugin_tb;
typedef struct { const char *t; struct { int min, cur; } v; bool sys; union { struct { int a, b; } s; }; } info_t;
void qemu_plugin_register_vcpu_tb_trans_cb(id_t_, void (*)(id_t_, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *, void (*)(unsigned, void *), int, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
void qemu_plugin_register_atexit_cb(id_t_, void (*)(id_t_, void *), void *);
void qemu_plugin_outs(const char *);
__attribute__((visibility("default"))) int qemu_plugin_version = API_VERSION;
static uint64_t n;
static void ex(unsigned c, void *k) { n += (uintptr_t)k; }
static void tr(id_t_ id, struct qemu_plugin_tb *tb) {
  qemu_plugin_register_vcpu_tb_exec_cb(tb, ex, 0, (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb)); }
static void fin(id_t_ id, void *u) { char b[64]; snprintf(b, 64, "insns=%llu\n", (unsigned long long)n); qemu_plugin_outs(b); }
__attribute__((visibility("default"))) int qemu_plugin_install(id_t_ id, const info_t *i, int c, char **v) {
  qemu_plugin_register_vcpu_tb_trans_cb(id, tr); qemu_plugin_register_atexit_cb(id, fin, 0); return 0; }
