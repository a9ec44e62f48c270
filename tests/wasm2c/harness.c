// Minimal wasm2c host for kvgate.wasm (wabt 1.0.32 naming: Z_...).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include "wasm-rt-impl.h"
#include "kvgate.h"

struct Z_env_instance_t { Z_kvgate_instance_t* m; };
struct Z_wasi_snapshot_preview1_instance_t { Z_kvgate_instance_t* m; };

static Z_kvgate_instance_t inst;
static struct Z_env_instance_t env;
static struct Z_wasi_snapshot_preview1_instance_t wasi;

static const char* config = "{}";
static char body[8192]; static size_t bodylen;
static char newbody[8192]; static size_t newbodylen;
static unsigned char hdrmap[512]; static size_t hdrlen; static unsigned nhdrs;
static unsigned long calls[32]; // per-import counters
static int verbose = 0; static const char* cur = "none";
enum {C_LOG, C_GETBUF, C_SETBUF, C_HDRS, C_RMHDR, C_LOCAL, C_DEFM, C_INCM, C_GETP, C_SETP, C_FDW, C_CLK, C_RND, C_YIELD, C_POLL, C_ARGS, C_ENV, C_N};
static const char* cname[C_N] = {"proxy_log","proxy_get_buffer_bytes","proxy_set_buffer_bytes","proxy_get_header_map_pairs","proxy_remove_header_map_value","proxy_send_local_response","proxy_define_metric","proxy_increment_metric","proxy_get_property","proxy_set_property","fd_write","clock_time_get","random_get","sched_yield","poll_oneoff","args_*","environ_*"};

static u8* MEM(void) { return inst.w2c_memory.data; }
static void chk(u32 p, u32 n) { if ((u64)p + n > inst.w2c_memory.size) { fprintf(stderr, "host: OOB %u+%u in %s\n", p, n, cur); abort(); } }
static void w32(u32 p, u32 v) { chk(p, 4); memcpy(MEM() + p, &v, 4); }
static void w64(u32 p, u64 v) { chk(p, 8); memcpy(MEM() + p, &v, 8); }
static u32 r32(u32 p) { u32 v; chk(p, 4); memcpy(&v, MEM() + p, 4); return v; }

static void give(const void* b, u32 n, u32 rd, u32 rs) {
  u32 p = Z_kvgateZ_proxy_on_memory_allocate(&inst, n); // may grow memory: re-read MEM()
  chk(p, n); memcpy(MEM() + p, b, n); w32(rd, p); w32(rs, n);
}

/* ---- env ---- */
u32 Z_envZ_proxy_log(struct Z_env_instance_t* e, u32 lvl, u32 p, u32 n) {
  calls[C_LOG]++; chk(p, n);
  if (verbose) fprintf(stderr, "guest log[%u]: %.*s\n", lvl, (int)n, (char*)MEM() + p);
  return 0;
}
u32 Z_envZ_proxy_get_buffer_bytes(struct Z_env_instance_t* e, u32 t, u32 start, u32 max, u32 rd, u32 rs) {
  calls[C_GETBUF]++;
  const char* b; size_t len;
  if (t == 0) { b = body; len = bodylen; } else if (t == 7) { b = config; len = strlen(config); } else return 2;
  if (len == 0) return 1;
  if (start > len) return 2;
  size_t n = len - start; if (n > max) n = max;
  give(b + start, (u32)n, rd, rs);
  return 0;
}
u32 Z_envZ_proxy_set_buffer_bytes(struct Z_env_instance_t* e, u32 t, u32 start, u32 size, u32 p, u32 n) {
  calls[C_SETBUF]++; chk(p, n);
  if (t != 0 || n > sizeof newbody) return 2;
  memcpy(newbody, MEM() + p, n); newbodylen = n;
  return 0;
}
u32 Z_envZ_proxy_get_header_map_pairs(struct Z_env_instance_t* e, u32 t, u32 rd, u32 rs) {
  calls[C_HDRS]++;
  if (t != 0) return 1;
  give(hdrmap, (u32)hdrlen, rd, rs);
  return 0;
}
u32 Z_envZ_proxy_remove_header_map_value(struct Z_env_instance_t* e, u32 t, u32 p, u32 n) { calls[C_RMHDR]++; return 0; }
static u32 local_status;
u32 Z_envZ_proxy_send_local_response(struct Z_env_instance_t* e, u32 st, u32 a, u32 b, u32 c, u32 d, u32 f, u32 g, u32 h) {
  calls[C_LOCAL]++; local_status = st;
  if (verbose) { chk(c, d); fprintf(stderr, "local response %u: %.*s\n", st, (int)d, (char*)MEM() + c); }
  return 0;
}
static u32 nmetrics;
u32 Z_envZ_proxy_define_metric(struct Z_env_instance_t* e, u32 t, u32 p, u32 n, u32 rid) {
  calls[C_DEFM]++; chk(p, n);
  if (verbose) fprintf(stderr, "metric %u: %.*s\n", nmetrics, (int)n, (char*)MEM() + p);
  w32(rid, nmetrics++); return 0;
}
u32 Z_envZ_proxy_increment_metric(struct Z_env_instance_t* e, u32 id, u64 d) { calls[C_INCM]++; return id < nmetrics ? 0 : 2; }
u32 Z_envZ_proxy_get_property(struct Z_env_instance_t* e, u32 a, u32 b, u32 c, u32 d) { calls[C_GETP]++; return 1; }
u32 Z_envZ_proxy_set_property(struct Z_env_instance_t* e, u32 p, u32 n, u32 vp, u32 vn) {
  calls[C_SETP]++;
  if (verbose) { chk(p, n); chk(vp, vn); fprintf(stderr, "set_property %.*s = %.*s\n", (int)n, (char*)MEM() + p, (int)vn, (char*)MEM() + vp); }
  return 0;
}

/* ---- WASI ---- */
u32 Z_wasi_snapshot_preview1Z_args_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 a, u32 b) { calls[C_ARGS]++; return 0; }
u32 Z_wasi_snapshot_preview1Z_args_sizes_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 a, u32 b) { calls[C_ARGS]++; w32(a, 0); w32(b, 0); return 0; }
u32 Z_wasi_snapshot_preview1Z_environ_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 a, u32 b) { calls[C_ENV]++; return 0; }
u32 Z_wasi_snapshot_preview1Z_environ_sizes_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 a, u32 b) { calls[C_ENV]++; w32(a, 0); w32(b, 0); return 0; }
u32 Z_wasi_snapshot_preview1Z_clock_time_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 id, u64 prec, u32 rp) {
  calls[C_CLK]++; struct timespec ts;
  clock_gettime(id == 0 ? CLOCK_REALTIME : CLOCK_MONOTONIC, &ts);
  w64(rp, (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec); return 0;
}
u32 Z_wasi_snapshot_preview1Z_fd_write(struct Z_wasi_snapshot_preview1_instance_t* w, u32 fd, u32 iovs, u32 n, u32 rp) {
  calls[C_FDW]++; u32 tot = 0;
  for (u32 i = 0; i < n; i++) { u32 p = r32(iovs + 8*i), l = r32(iovs + 8*i + 4); chk(p, l); fwrite(MEM() + p, 1, l, stderr); tot += l; }
  w32(rp, tot); return 0;
}
u32 Z_wasi_snapshot_preview1Z_poll_oneoff(struct Z_wasi_snapshot_preview1_instance_t* w, u32 a, u32 b, u32 n, u32 rp) {
  calls[C_POLL]++; fprintf(stderr, "host: poll_oneoff called (cb %s)\n", cur); w32(rp, 0); return 52; /* ENOSYS */
}
void Z_wasi_snapshot_preview1Z_proc_exit(struct Z_wasi_snapshot_preview1_instance_t* w, u32 code) {
  fprintf(stderr, "host: proc_exit(%u) during %s\n", code, cur); exit(100 + (code & 0x7f));
}
u32 Z_wasi_snapshot_preview1Z_random_get(struct Z_wasi_snapshot_preview1_instance_t* w, u32 p, u32 n) {
  calls[C_RND]++; chk(p, n);
  for (u32 off = 0; off < n;) { ssize_t r = getrandom(MEM() + p + off, n - off, 0); if (r <= 0) return 29; off += r; }
  return 0;
}
u32 Z_wasi_snapshot_preview1Z_sched_yield(struct Z_wasi_snapshot_preview1_instance_t* w) { calls[C_YIELD]++; return 0; }

/* ---- helpers ---- */
static void put32(unsigned char* b, u32 v) { memcpy(b, &v, 4); }
static void build_headers(size_t blen) {
  char cl[32]; snprintf(cl, sizeof cl, "%zu", blen);
  const char* kv[][2] = {{":method","POST"},{":path","/v1/chat/completions"},{":authority","localhost"},{"content-type","application/json"},{"content-length",cl}};
  nhdrs = sizeof kv / sizeof kv[0];
  put32(hdrmap, nhdrs);
  size_t o = 4 + 8 * nhdrs;
  for (unsigned i = 0; i < nhdrs; i++) {
    size_t ks = strlen(kv[i][0]), vs = strlen(kv[i][1]);
    put32(hdrmap + 4 + 8*i, ks); put32(hdrmap + 8 + 8*i, vs);
    memcpy(hdrmap + o, kv[i][0], ks + 1); o += ks + 1;
    memcpy(hdrmap + o, kv[i][1], vs + 1); o += vs + 1;
  }
  hdrlen = o;
}
static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }

#define TRY(name, stmt) do { cur = name; wasm_rt_trap_t tc = wasm_rt_impl_try(); \
  if (tc) { fprintf(stderr, "TRAP in %s: %s (code %d)\n", name, wasm_rt_strerror(tc), tc); exit(2); } stmt; } while (0)

int main(int argc, char** argv) {
  int N = argc > 1 ? atoi(argv[1]) : 20000;
  verbose = getenv("V") != NULL;
  // 4 KiB body
  const char* head = "{\"model\":\"m\",\"kv_hints\":{\"protocol_version\":\"0.1\"},\"messages\":[{\"role\":\"user\",\"content\":\"";
  const char* tail = "\"}]}";
  size_t hl = strlen(head), tl = strlen(tail);
  memcpy(body, head, hl); memset(body + hl, 'a', 4096 - hl - tl); memcpy(body + 4096 - tl, tail, tl); bodylen = 4096;
  build_headers(bodylen);

  double t0 = now();
  wasm_rt_init();
  Z_kvgate_init_module();
  env.m = &inst; wasi.m = &inst;
  TRY("instantiate", Z_kvgate_instantiate(&inst, &env, &wasi));
  TRY("_initialize", Z_kvgateZ__initialize(&inst));
  double t1 = now();
  u32 r;
  TRY("proxy_on_vm_start", r = Z_kvgateZ_proxy_on_vm_start(&inst, 0, 0)); fprintf(stderr, "vm_start -> %u\n", r);
  TRY("proxy_on_context_create(root)", Z_kvgateZ_proxy_on_context_create(&inst, 1, 0));
  TRY("proxy_on_configure", r = Z_kvgateZ_proxy_on_configure(&inst, 1, (u32)strlen(config))); fprintf(stderr, "configure -> %u\n", r);
  fprintf(stderr, "init+_initialize: %.3f ms; memory after configure: %llu bytes\n", (t1 - t0) * 1e3, (unsigned long long)inst.w2c_memory.size);

  // one checked request
  u32 id = 2, a1, a2;
  newbodylen = 0; local_status = 0;
  TRY("proxy_on_context_create", Z_kvgateZ_proxy_on_context_create(&inst, id, 1));
  TRY("proxy_on_request_headers", a1 = Z_kvgateZ_proxy_on_request_headers(&inst, id, nhdrs, 0));
  TRY("proxy_on_request_body", a2 = Z_kvgateZ_proxy_on_request_body(&inst, id, (u32)bodylen, 1));
  TRY("proxy_on_log", Z_kvgateZ_proxy_on_log(&inst, id));
  TRY("proxy_on_delete", Z_kvgateZ_proxy_on_delete(&inst, id));
  fprintf(stderr, "first request: headers action=%u body action=%u local=%u replaced body len=%zu (orig %zu)\n", a1, a2, local_status, newbodylen, bodylen);
  if (newbodylen) fprintf(stderr, "replaced body head: %.120s\n", newbody);

  memset(calls, 0, sizeof calls);
  unsigned long bad = 0;
  verbose = 0;
  cur = "loop";
  wasm_rt_trap_t tc = wasm_rt_impl_try();
  if (tc) { fprintf(stderr, "TRAP in loop (id %u): %s\n", id, wasm_rt_strerror(tc)); exit(2); }
  double s = now();
  for (int i = 0; i < N; i++) {
    id++;
    newbodylen = 0;
    Z_kvgateZ_proxy_on_context_create(&inst, id, 1);
    a1 = Z_kvgateZ_proxy_on_request_headers(&inst, id, nhdrs, 0);
    a2 = Z_kvgateZ_proxy_on_request_body(&inst, id, (u32)bodylen, 1);
    Z_kvgateZ_proxy_on_log(&inst, id);
    Z_kvgateZ_proxy_on_delete(&inst, id);
    if (a1 != a2 || newbodylen == 0) bad++;
  }
  double e = now();
  printf("requests=%d total=%.3f s  ns/request=%.0f  mismatched=%lu  memory=%llu bytes\n", N, e - s, (e - s) * 1e9 / N, bad, (unsigned long long)inst.w2c_memory.size);
  for (int i = 0; i < C_N; i++) if (calls[i]) printf("  %-32s %lu calls (%.2f/req)\n", cname[i], calls[i], (double)calls[i] / N);
  return 0;
}
