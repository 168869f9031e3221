/*
 * A fake libnvidia-ml for the GPU driver audit tests: the NVML entry points
 * audit/gpu_driver.cpp calls, answering from the file named by
 * $MLTUNE_FAKE_NVML, read at every nvmlInit_v2.  Plain C with no library
 * but libc, so that even the static mltunectl can dlopen it.
 *
 *   init=9                      nvmlInit_v2 fails with this code (9: driver not loaded)
 *   driver=550.90.07
 *   stderr=TEXT                 written to stderr at nvmlInit_v2, no newline (a chatty library)
 *   gpu 00000000:18:00.0 KEY=VALUE...
 *
 * GPU keys: persistence ecc ecc_pending mig mig_pending app_gr default_gr
 * app_mem default_mem reasons retired remap_pending remap_failure; a key
 * left out answers NVML_ERROR_NOT_SUPPORTED.  Without $MLTUNE_FAKE_NVML the
 * driver is "not loaded".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_DRIVER_NOT_LOADED = 9 };

typedef struct nvmlPciInfo_st {
	char busIdLegacy[16];
	unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

enum { K_PERSISTENCE, K_ECC, K_ECC_PENDING, K_MIG, K_MIG_PENDING, K_APP_GR, K_DEFAULT_GR, K_APP_MEM,
       K_DEFAULT_MEM, K_REASONS, K_RETIRED, K_REMAP_PENDING, K_REMAP_FAILURE, K_COUNT };
static const char *const key_names[K_COUNT] = {
	"persistence", "ecc", "ecc_pending", "mig", "mig_pending", "app_gr", "default_gr",
	"app_mem", "default_mem", "reasons", "retired", "remap_pending", "remap_failure"};

struct nvmlDevice_st {
	char bus_id[32];
	int has[K_COUNT];
	unsigned long long val[K_COUNT];
};

#define MAX_GPUS 16
static struct nvmlDevice_st gpus[MAX_GPUS];
static unsigned ngpus;
static char driver[80] = "0.0";
static int initialized;

static void parse_gpu(char *line)
{
	struct nvmlDevice_st *g;
	char *tok, *save = NULL;
	int k;

	if (ngpus == MAX_GPUS)
		return;
	g = &gpus[ngpus++];
	memset(g, 0, sizeof(*g));
	tok = strtok_r(line, " \t\n", &save); /* "gpu" */
	tok = strtok_r(NULL, " \t\n", &save);
	if (tok)
		snprintf(g->bus_id, sizeof(g->bus_id), "%s", tok);
	while ((tok = strtok_r(NULL, " \t\n", &save))) {
		char *eq = strchr(tok, '=');

		if (!eq)
			continue;
		*eq = '\0';
		for (k = 0; k < K_COUNT; k++) {
			if (strcmp(tok, key_names[k]) == 0) {
				g->has[k] = 1;
				g->val[k] = strtoull(eq + 1, NULL, 0);
			}
		}
	}
}

nvmlReturn_t nvmlInit_v2(void)
{
	const char *path = getenv("MLTUNE_FAKE_NVML");
	char line[512];
	FILE *f;

	ngpus = 0;
	if (!path)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	f = fopen(path, "r");
	if (!f)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "init=", 5) == 0) {
			fclose(f);
			return atoi(line + 5);
		}
		if (strncmp(line, "stderr=", 7) == 0)
			fprintf(stderr, "%.*s", (int)strcspn(line + 7, "\n"), line + 7);
		if (strncmp(line, "driver=", 7) == 0)
			snprintf(driver, sizeof(driver), "%.*s", (int)strcspn(line + 7, "\n"), line + 7);
		if (strncmp(line, "gpu ", 4) == 0)
			parse_gpu(line);
	}
	fclose(f);
	initialized = 1;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	initialized = 0;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t rc)
{
	switch (rc) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned length)
{
	snprintf(version, length, "%s", driver);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count)
{
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	*count = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device)
{
	if (!initialized || index >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
	memset(pci, 0, sizeof(*pci));
	snprintf(pci->busId, sizeof(pci->busId), "%s", d->bus_id);
	return NVML_SUCCESS;
}

static nvmlReturn_t get(nvmlDevice_t d, int k, unsigned *out)
{
	if (!d->has[k])
		return NVML_ERROR_NOT_SUPPORTED;
	*out = (unsigned)d->val[k];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, unsigned *mode)
{
	return get(d, K_PERSISTENCE, mode);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, unsigned *current, unsigned *pending)
{
	return get(d, K_ECC, current) ?: get(d, K_ECC_PENDING, pending);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending)
{
	return get(d, K_MIG, current) ?: get(d, K_MIG_PENDING, pending);
}

nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, unsigned type, unsigned *mhz)
{
	return get(d, type == 0 ? K_APP_GR : K_APP_MEM, mhz);
}

nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t d, unsigned type, unsigned *mhz)
{
	return get(d, type == 0 ? K_DEFAULT_GR : K_DEFAULT_MEM, mhz);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons)
{
	if (!d->has[K_REASONS])
		return NVML_ERROR_NOT_SUPPORTED;
	*reasons = d->val[K_REASONS];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, unsigned *pending)
{
	return get(d, K_RETIRED, pending);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned *corrected, unsigned *uncorrected,
				       unsigned *pending, unsigned *failure)
{
	*corrected = 0;
	*uncorrected = 0;
	return get(d, K_REMAP_PENDING, pending) ?: get(d, K_REMAP_FAILURE, failure);
}
