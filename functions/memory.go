package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// hostMemory returns the memory this process may use, in bytes, and where
// that figure comes from: Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE (MB),
// the cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes), or the
// machine's memory (/proc/meminfo), the smallest that is known. Zero when
// none is.
func hostMemory() (int64, string) {
	var best int64
	var src string
	take := func(v int64, from string) {
		if v > 0 && (best == 0 || v < best) {
			best, src = v, from
		}
	}
	if v, ok := os.LookupEnv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"); ok {
		if mb, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && mb > 0 && mb < 1<<40 {
			take(mb<<20, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+v+" MB")
		}
	}
	take(readLimit("/sys/fs/cgroup/memory.max"), "the cgroup's memory.max")
	take(readLimit("/sys/fs/cgroup/memory/memory.limit_in_bytes"), "the cgroup's memory.limit_in_bytes")
	take(memTotal("/proc/meminfo"), "the machine's MemTotal")
	return best, src
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
