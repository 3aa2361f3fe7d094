package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"fngateway/core"
)

// instanceMemorySetting is the app setting the Azure module writes from the
// Flex Consumption app's instance_memory_in_mb (512, 2048 or 4096 MB: "Azure
// Functions Flex Consumption plan hosting", Instance memory): nothing on the
// instance says its size, and its cgroup and MemTotal may be the machine's.
// Any host may set it; on Lambda, AWS_LAMBDA_FUNCTION_MEMORY_SIZE says it.
const instanceMemorySetting = "InstanceMemoryMB"

// hostMemory returns the memory this process may use, in bytes, and where
// that figure comes from: InstanceMemoryMB (MB, the Azure module's),
// Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE (MB), the cgroup's limit (v2
// memory.max, v1 memory.limit_in_bytes), or the machine's memory
// (/proc/meminfo), the smallest that is known. Zero when none is. An
// InstanceMemoryMB that is not a positive whole number of MB is an error
// naming it.
func hostMemory(lookup func(string) (string, bool)) (int64, string, error) {
	var best int64
	var src string
	take := func(v int64, from string) {
		if v > 0 && (best == 0 || v < best) {
			best, src = v, from
		}
	}
	if v, ok := lookup(instanceMemorySetting); ok {
		mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || mb <= 0 || mb >= 1<<40 {
			return 0, "", &core.SettingError{Name: instanceMemorySetting, Value: v,
				Want: "want the instance's memory as a positive whole number of MB (the Azure module writes its instance_memory_in_mb)"}
		}
		take(mb<<20, instanceMemorySetting+"="+strings.TrimSpace(v)+" MB")
	}
	if v, ok := lookup("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"); ok {
		if mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && mb > 0 && mb < 1<<40 {
			take(mb<<20, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+v+" MB")
		}
	}
	take(readLimit("/sys/fs/cgroup/memory.max"), "the cgroup's memory.max")
	take(readLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"), "the cgroup's memory.limit_in_bytes")
	take(memTotal("/proc/meminfo"), "the machine's MemTotal")
	return best, src, nil
}

// readLimit reads a cgroup memory limit file: a byte count, or "max" (or
// a v1 figure near the int64 maximum) for none.
func readLimit(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0
	}
	return v
}

// memTotal reads MemTotal from a /proc/meminfo file, in bytes.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
