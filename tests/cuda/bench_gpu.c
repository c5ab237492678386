/* bench_gpu.c - bench-gpu: training steps on the GPU under each recompute policy, one table.
 *
 *   bench-gpu [PRESET [BATCH [SEQ [STEPS]]]]     defaults: gpt2-small 16 1024 8
 *   bench-gpu --tokens FILE [PRESET [BATCH [SEQ [STEPS]]]]
 *
 * Builds a device cuda run (remat's own trainer: forward, backward, global norm, AdamW) on
 * random tokens written to a temporary llm.c shard, then for each policy (off, selective,
 * full, offload, full with the head chunked) takes STEPS steps, drops the first two, and
 * prints the median step time, tokens/s, what the allocator holds at the peak (all
 * categories, and activations alone), the planner's peak for the policy (what the run holds
 * whatever its policy, as its allocator counts it, and the plan's activations: what `remat
 * plan` and the controller predict), what cudaMemGetInfo says is in use on the device (the
 * allocator, plus the CUDA context and the libraries' own memory), and the pinned host
 * memory of offloaded activations. With --tokens it writes the same shard to FILE instead
 * and exits: the tokens llm.c's train_gpt2cu trains on beside it (tests/cuda/llmc.sh).
 * Precision and attention follow REMAT_CUDA_PRECISION and REMAT_CUDA_ATTENTION (eng_cuda.h). A measurement, never a test: tests/cuda/run-on-gpu.sh
 * runs it after the tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_cuda.h"
#include "eng_cuda_mem.h"
#include "eng_train.h"

#define MAX_STEPS 64
#define DROP 2 /* first steps of each policy left out: the layout's first touch */

static const char *policies[] = {"off", "selective", "full", "offload", "full;head=chunked"};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* An llm.c shard of n random tokens below V; 0 or -1. */
static int write_tokens(const char *path, size_t n, int V)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	int32_t hdr[256] = {20240520, 1, (int32_t)n};
	uint64_t s = 0x5eed;
	int ok = fwrite(hdr, sizeof hdr, 1, f) == 1;
	for (size_t i = 0; ok && i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		uint16_t t = (uint16_t)((s >> 33) % (uint64_t)V);
		ok = fwrite(&t, 2, 1, f) == 1;
	}
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* STEPS steps of tr under policy name, the first DROP left out: its table row. 0, or 1
 * when the policy or a step failed (said in its row). */
static int bench_policy(eng_trainer *tr, const char *name, int steps)
{
	eng_policy p;
	eng_err err;
	double ms[MAX_STEPS], rc_ms = 0;
	if (eng_trainer_parse_policy(tr, name, &p, &err) < 0 ||
		eng_trainer_set_policy(tr, &p, &err) < 0) {
		printf("%-18s %s\n", name, err.msg);
		return 1;
	}
	eng_cuda_mem_reset_peak();
	int n = 0, rc = 0;
	for (int s = 0; s < steps; s++) {
		eng_step_stats st;
		if (eng_trainer_step_as(tr, NULL, &st, &err) < 0) {
			printf("%-18s %s\n", name, err.msg);
			rc = 1;
			break;
		}
		if (s >= DROP) {
			ms[n++] = st.step_ms;
			rc_ms += st.recompute_ms;
		}
	}
	if (n == 0)
		return rc;
	qsort(ms, (size_t)n, sizeof ms[0], cmp_double);
	double med = ms[n / 2];
	eng_cuda_mem_stats ds;
	eng_cuda_mem_get_stats(&ds);
	printf("%-18s %9.1f %10.0f %10.1f %10.1f %10.1f %10.1f %10.1f %9.1f\n", name, med,
		tr->model.B * tr->model.T / (med / 1e3), ds.total_peak_reset / 1048576.0,
		eng_trainer_predicted_peak(tr, &p) / 1048576.0,
		ds.current[ENG_MEM_ACTIVATIONS] / 1048576.0,
		(ds.device_total - ds.device_free) / 1048576.0, ds.pinned / 1048576.0,
		rc_ms / n);
	fflush(stdout);
	return rc;
}

int main(int argc, char **argv)
{
	const char *keep = NULL; /* --tokens FILE: the shard written there, and nothing run */
	if (argc > 1 && strcmp(argv[1], "--tokens") == 0) {
		if (argc < 3 || !argv[2][0]) {
			fprintf(stderr, "bench-gpu: --tokens needs a file\n");
			return 2;
		}
		keep = argv[2];
		argv += 2;
		argc -= 2;
	}
	const char *preset = argc > 1 ? argv[1] : "gpt2-small";
	int B = argc > 2 ? atoi(argv[2]) : 16, T = argc > 3 ? atoi(argv[3]) : 1024;
	int steps = argc > 4 ? atoi(argv[4]) : 8;
	char path[] = "/tmp/bench-gpu-XXXXXX", spec_text[1024];
	eng_err err;
	eng_config cfg;
	if (B < 1 || T < 1 || steps <= DROP || steps > MAX_STEPS ||
		eng_config_preset(preset, &cfg, &err) < 0) {
		fprintf(stderr, "usage: bench-gpu [--tokens FILE] [PRESET [BATCH [SEQ [STEPS "
				"(%d..%d)]]]]%s%s\n",
			DROP + 1, MAX_STEPS, err.msg[0] ? "\n" : "", err.msg[0] ? err.msg : "");
		return 2;
	}
	size_t ntok = (size_t)B * T * (steps + 2) + 1;
	if (keep) {
		if (write_tokens(keep, ntok, cfg.vocab_size) < 0) {
			fprintf(stderr, "bench-gpu: cannot write %s\n", keep);
			return 1;
		}
		return 0;
	}
	int fd = mkstemp(path);
	if (fd < 0 || (close(fd), write_tokens(path, ntok, cfg.vocab_size)) < 0) {
		fprintf(stderr, "bench-gpu: cannot write %s\n", path);
		return 1;
	}
	snprintf(spec_text, sizeof spec_text,
		"{\"model\":{\"preset\":\"%s\"},\"data\":{\"train\":\"%s\"},\"batch\":%d,"
		"\"seq_len\":%d,\"steps\":1000000,\"device\":\"cuda\",\"threads\":2}", preset, path, B,
		T);
	eng_spec spec;
	eng_trainer tr;
	if (eng_spec_parse(&spec, spec_text, &err) < 0 || eng_trainer_init(&tr, &spec, &err) < 0) {
		fprintf(stderr, "bench-gpu: %s\n", err.msg);
		unlink(path);
		return 1;
	}
	unlink(path); /* the shard is in memory now */
	printf("bench-gpu: %s (L %d, C %d, NH %d, V %d), batch %d x %d, %d steps per policy "
	       "(first %d dropped)\n%s\n\n", preset, cfg.n_layer, cfg.n_embd, cfg.n_head,
		cfg.vocab_size, B, T, steps, DROP, eng_trainer_backend(&tr));
	printf("%-18s %9s %10s %10s %10s %10s %10s %10s %9s\n", "policy", "ms/step", "tokens/s",
		"peak MiB", "plan MiB", "activ. MiB", "device MiB", "pinned MiB", "recomp ms");
	int rc = 0;
	for (size_t k = 0; k < sizeof policies / sizeof policies[0]; k++)
		rc |= bench_policy(&tr, policies[k], steps);
	eng_trainer_free(&tr);
	return rc;
}
