/*
 * A stand-in NVML (libnvidia-ml.so.1) for tests: what Slurm's gpu/nvml plugin asks of the
 * driver, answered from a description of GPUs, so that a real slurmd with AutoDetect=nvml finds
 * GPUs and MIG instances on a machine without any, and writes the variables it writes on a real
 * node. Compiled against NVIDIA's own nvml.h (PyPI's nvidia-nvml-dev), so every signature is the
 * header's. Built by contrib/slurm-build.sh (so that configure finds an NVML) and by
 * contrib/sandbox.sh for a sandbox with LAMA_SANDBOX_NVML; tests/slurm/nvml.sh runs it.
 *
 * The description is the file named by LAMA_NVML_STANDIN, one line per GPU or MIG instance:
 *   gpu MINOR UUID BUSID CPULIST [NAME]
 *   mig PARENT_MINOR GI CI UUID SLICES MEMORY_MB
 *   driver VERSION        (default 570.00.00; Slurm names MIG instances by their own UUIDs
 *                          from 470.42.01 on, as MIG-GPU-UUID/GI/CI before)
 * GPUs are enumerated in the order of their lines (NVML's index), MIG instances under the GPU
 * whose minor number they name; a GPU with MIG lines is in MIG mode.
 */
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16
#define MAX_MIGS 7

struct mig {
	unsigned gi, ci, slices, memory_mb;
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
};

struct gpu {
	unsigned minor, nmig;
	char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	char bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
	char cpus[256];
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	struct mig mig[MAX_MIGS];
};

/* A handle is a pointer to one of these: the GPU, and the MIG instance (or -1). */
struct handle {
	int gpu, mig;
};

static struct gpu gpus[MAX_GPUS];
static struct handle handles[MAX_GPUS * (MAX_MIGS + 1)];
static unsigned ngpus;
static int loaded;
static char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "570.00.00";

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src);
}

static nvmlReturn_t load(void)
{
	const char *path = getenv("LAMA_NVML_STANDIN");
	char line[512];
	FILE *f;

	if (loaded)
		return NVML_SUCCESS;
	if (!path || !(f = fopen(path, "r")))
		return NVML_ERROR_DRIVER_NOT_LOADED;
	while (fgets(line, sizeof(line), f)) {
		char kind[8], uuid[96], bus[32], cpus[256], name[96] = "NVIDIA Stand-in";
		unsigned minor, gi, ci, slices, mem;

		if (sscanf(line, "gpu %u %95s %31s %255s %95[^\n]", &minor, uuid, bus, cpus,
			   name) >= 4 && ngpus < MAX_GPUS) {
			struct gpu *g = &gpus[ngpus++];

			g->minor = minor;
			copy(g->uuid, sizeof(g->uuid), uuid);
			copy(g->bus, sizeof(g->bus), bus);
			copy(g->cpus, sizeof(g->cpus), cpus);
			copy(g->name, sizeof(g->name), name);
		} else if (sscanf(line, "driver %63s", driver) == 1) {
			continue;
		} else if (sscanf(line, "%7s %u %u %u %95s %u %u", kind, &minor, &gi, &ci, uuid,
				  &slices, &mem) == 7 && !strcmp(kind, "mig")) {
			for (unsigned i = 0; i < ngpus; i++) {
				struct gpu *g = &gpus[i];

				if (g->minor != minor || g->nmig >= MAX_MIGS)
					continue;
				g->mig[g->nmig] = (struct mig){ gi, ci, slices, mem, "" };
				copy(g->mig[g->nmig].uuid, sizeof(g->mig[0].uuid), uuid);
				g->nmig++;
			}
		}
	}
	fclose(f);
	loaded = 1;
	return NVML_SUCCESS;
}

static struct handle *handle_of(int gpu, int mig)
{
	struct handle *h = &handles[gpu * (MAX_MIGS + 1) + mig + 1];

	h->gpu = gpu;
	h->mig = mig;
	return h;
}

static struct handle *of(nvmlDevice_t d)
{
	return (struct handle *) d;
}

static struct gpu *gpu_of(nvmlDevice_t d)
{
	return &gpus[of(d)->gpu];
}

nvmlReturn_t DECLDIR nvmlInit_v2(void)
{
	return load();
}

/* The unversioned name too, as the real library exports it: configure links against it. */
#undef nvmlInit
nvmlReturn_t DECLDIR nvmlInit(void);
nvmlReturn_t DECLDIR nvmlInit(void)
{
	return load();
}

nvmlReturn_t DECLDIR nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

const DECLDIR char *nvmlErrorString(nvmlReturn_t result)
{
	return result == NVML_SUCCESS ? "Success" : "Not supported by the stand-in NVML";
}

nvmlReturn_t DECLDIR nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	copy(version, length, driver);
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	copy(version, length, "12.570.00");
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
	*deviceCount = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (index >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = (nvmlDevice_t) handle_of(index, -1);
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	copy(name, length, gpu_of(device)->name);
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	struct handle *h = of(device);

	copy(uuid, length, h->mig < 0 ? gpus[h->gpu].uuid : gpus[h->gpu].mig[h->mig].uuid);
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	struct gpu *g = gpu_of(device);
	unsigned dom = 0, bus = 0, dev = 0, fn = 0;

	memset(pci, 0, sizeof(*pci));
	sscanf(g->bus, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
	snprintf(pci->busId, sizeof(pci->busId), "%08x:%02x:%02x.%x", dom, bus, dev, fn);
	copy(pci->busIdLegacy, sizeof(pci->busIdLegacy), g->bus);
	pci->domain = dom;
	pci->bus = bus;
	pci->device = dev;
	pci->pciDeviceId = 0x233510de;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	*minorNumber = gpu_of(device)->minor;
	return NVML_SUCCESS;
}

/* The GPU's CPUs (a cpulist such as 0-63) as NVML's array of unsigned longs. */
nvmlReturn_t DECLDIR nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
					      unsigned long *cpuSet)
{
	const char *p = gpu_of(device)->cpus;
	const unsigned bits = 8 * sizeof(unsigned long);

	memset(cpuSet, 0, cpuSetSize * sizeof(unsigned long));
	while (*p) {
		char *end;
		unsigned long a = strtoul(p, &end, 10), b = a;

		if (*end == '-')
			b = strtoul(end + 1, &end, 10);
		for (unsigned long c = a; c <= b && c / bits < cpuSetSize; c++)
			cpuSet[c / bits] |= 1UL << (c % bits);
		p = *end == ',' ? end + 1 : end;
		if (end == p && *p)
			break;
	}
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
					  unsigned int *pendingMode)
{
	unsigned on = gpu_of(device)->nmig ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;

	*currentMode = on;
	*pendingMode = on;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	*count = gpu_of(device)->nmig;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
							 nvmlDevice_t *migDevice)
{
	struct handle *h = of(device);

	if (index >= gpus[h->gpu].nmig)
		return NVML_ERROR_NOT_FOUND;
	*migDevice = (nvmlDevice_t) handle_of(h->gpu, (int) index);
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	struct handle *h = of(device);

	if (h->mig < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*id = gpus[h->gpu].mig[h->mig].gi;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	struct handle *h = of(device);

	if (h->mig < 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*id = gpus[h->gpu].mig[h->mig].ci;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
						nvmlDeviceAttributes_t *attributes)
{
	struct handle *h = of(device);

	memset(attributes, 0, sizeof(*attributes));
	if (h->mig >= 0) {
		struct mig *m = &gpus[h->gpu].mig[h->mig];

		attributes->gpuInstanceSliceCount = m->slices;
		attributes->computeInstanceSliceCount = m->slices;
		attributes->memorySizeMB = m->memory_mb;
	}
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
					      nvmlEnableState_t *isActive)
{
	(void) device;
	(void) link;
	*isActive = NVML_FEATURE_DISABLED;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t DECLDIR nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
							 nvmlPciInfo_t *pci)
{
	(void) device;
	(void) link;
	(void) pci;
	return NVML_ERROR_NOT_SUPPORTED;
}

/* Clocks, processes and utilisation: Slurm's frequency and accounting code, not detection. */
#define UNSUPPORTED(...)                                 \
	nvmlReturn_t DECLDIR __VA_ARGS__                 \
	{                                                \
		return NVML_ERROR_NOT_SUPPORTED;         \
	}
UNSUPPORTED(nvmlDeviceGetApplicationsClock(nvmlDevice_t d, nvmlClockType_t t, unsigned int *c))
UNSUPPORTED(nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t t, unsigned int *c))
UNSUPPORTED(nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int m, unsigned int *n,
						 unsigned int *c))
UNSUPPORTED(nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *n, unsigned int *c))
UNSUPPORTED(nvmlDeviceResetApplicationsClocks(nvmlDevice_t d))
UNSUPPORTED(nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d))
UNSUPPORTED(nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d))
UNSUPPORTED(nvmlDeviceSetApplicationsClocks(nvmlDevice_t d, unsigned int m, unsigned int g))
UNSUPPORTED(nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int a, unsigned int b))
UNSUPPORTED(nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned int a, unsigned int b))
UNSUPPORTED(nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *u,
					    unsigned int *n, unsigned long long t))

nvmlReturn_t DECLDIR nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
							     unsigned int *infoCount,
							     nvmlProcessInfo_t *infos)
{
	(void) device;
	(void) infos;
	*infoCount = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t DECLDIR nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
							      unsigned int *infoCount,
							      nvmlProcessInfo_t *infos)
{
	(void) device;
	(void) infos;
	*infoCount = 0;
	return NVML_SUCCESS;
}
