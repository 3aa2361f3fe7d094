package terraform

import (
	"archive/zip"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// lambdaMachines maps the Lambda architectures (aws_lambda_function's
// architectures) to the ELF machine a bootstrap built for them has.
var lambdaMachines = map[string]elf.Machine{
	"arm64":  elf.EM_AARCH64,
	"x86_64": elf.EM_X86_64,
}

// TestLambdaArchitecture builds the zip as make package-aws builds it (the
// same rule, into a temporary folder) and holds the ELF header of its
// bootstrap against the architecture the AWS example deploys: a bootstrap
// for another processor fails every invocation with an exec format error.
// The rule builds a stand-in main package (LAMBDA_MAIN), which compiles in
// seconds where the gateway for another processor took minutes on a fresh
// machine; the modules the gateway would link are those `go list` finds
// under the build settings the stand-in was built with (its build
// information: tags, GOOS, GOARCH, CGO_ENABLED).
func TestLambdaArchitecture(t *testing.T) {
	want, err := exampleArchitecture("examples/aws")
	if err != nil {
		t.Fatal(err)
	}
	machine, ok := lambdaMachines[want]
	if !ok {
		t.Fatalf("examples/aws deploys architecture %q, which is not a Lambda architecture (arm64, x86_64)", want)
	}

	dist := t.TempDir()
	cmd := exec.Command("make", "-s", "package-aws", "AWS_DIST="+dist, "LAMBDA_MAIN=./terraform/testdata/bootstrap")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make package-aws: %v\n%s", err, out)
	}
	zipPath := filepath.Join(dist, "aws-lambda.zip")
	got, err := zippedMachine(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	if got != machine {
		t.Errorf("make package-aws builds bootstrap for %v, but examples/aws deploys architecture %q (%v): every invocation would fail with an exec format error", got, want, machine)
	}
	// Built for one cloud (-tags noazure): the Azure SDK, whose packages'
	// initialisation every cold start would pay, is not linked; nor, as a
	// Lambda function only (-tags lambdaonly), the AWS SDK's config package
	// and the credential providers of its default chain (STS, SSO, SSO
	// OIDC, signin), which Lambda never uses.
	info, err := zippedBuildInfo(zipPath, "bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	mods, err := linkedModules(info, "./functions")
	if err != nil {
		t.Fatal(err)
	}
	checkLinked(t, "make package-aws", mods, "github.com/aws/aws-sdk-go-v2/service/s3", "github.com/Azure/", "github.com/AzureAD/",
		"github.com/aws/aws-sdk-go-v2/config", "github.com/aws/aws-sdk-go-v2/service/sso", "github.com/aws/aws-sdk-go-v2/service/sts",
		"github.com/aws/aws-sdk-go-v2/service/signin", "github.com/aws/aws-sdk-go-v2/feature/ec2/imds")
}

// linkedModules returns the modules a build of pkg (a package of this
// repository) links under the settings of info: its build tags and target.
func linkedModules(info *buildinfo.BuildInfo, pkg string) (map[string]bool, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg)
	cmd.Dir = ".."
	cmd.Env = os.Environ()
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags":
			cmd.Args = append(cmd.Args[:len(cmd.Args)-1], "-tags", s.Value, pkg)
		case "GOOS", "GOARCH", "CGO_ENABLED":
			cmd.Env = append(cmd.Env, s.Key+"="+s.Value)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	mods := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		mods[m] = true
	}
	return mods, nil
}

// checkLinked holds the modules a package links (mods, of what is named):
// want must be among them, and none may start with one of the refused
// prefixes.
func checkLinked(t *testing.T, what string, mods map[string]bool, want string, refused ...string) {
	t.Helper()
	if !mods[want] {
		t.Errorf("%s does not link %s", what, want)
	}
	for m := range mods {
		for _, r := range refused {
			if strings.HasPrefix(m, r) {
				t.Errorf("%s links %s: want no module under %s in this cloud's package", what, m, r)
			}
		}
	}
}

// zippedBuildInfo returns the build information of the Go executable name
// at the root of a zip (which -s -w keep).
func zippedBuildInfo(zipPath, name string) (*buildinfo.BuildInfo, error) {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	rc, err := zr.Open(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", zipPath, err)
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.Read(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", zipPath, name, err)
	}
	return info, nil
}

// zippedModules returns the modules the Go executable name at the root of
// a zip was built with (its build information).
func zippedModules(zipPath, name string) (map[string]bool, error) {
	info, err := zippedBuildInfo(zipPath, name)
	if err != nil {
		return nil, err
	}
	mods := map[string]bool{}
	for _, d := range info.Deps {
		mods[d.Path] = true
	}
	return mods, nil
}

// exampleArchitecture returns the architecture an example passes to the AWS
// module, or the module's default when it passes none.
func exampleArchitecture(dir string) (string, error) {
	ex, err := loadModule(dir)
	if err != nil {
		return "", err
	}
	e, err := ex.eval(sampleHosts)
	if err != nil {
		return "", err
	}
	source, args, err := e.callArgs("gateway")
	if err != nil {
		return "", err
	}
	arch, ok := args["architecture"]
	if !ok {
		m, err := loadModule(filepath.Join(dir, source))
		if err != nil {
			return "", err
		}
		v, ok := m.vars["architecture"]
		if !ok || v.def == cty.NilVal {
			return "", fmt.Errorf("%s: the module has no architecture variable with a default", source)
		}
		arch = v.def
	}
	s, ok := text(arch)
	if !ok {
		return "", fmt.Errorf("%s: architecture is not a known string: %#v", dir, arch)
	}
	return s, nil
}

// zippedMachine returns the ELF machine of the executable bootstrap at the
// root of a Lambda zip.
func zippedMachine(path string) (elf.Machine, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != "bootstrap" {
			continue
		}
		if f.Mode()&0o111 == 0 {
			return 0, fmt.Errorf("%s: bootstrap is not executable (mode %v): Lambda could not start it", path, f.Mode())
		}
		rc, err := f.Open()
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return 0, err
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return 0, fmt.Errorf("%s: bootstrap: %w", path, err)
		}
		return ef.Machine, nil
	}
	return 0, fmt.Errorf("%s: no bootstrap at the root", path)
}

// TestZippedMachine checks the reader on zips of known content: it reads the
// machine of this test's own binary, and refuses a zip without bootstrap or
// with a bootstrap that is not an ELF executable.
func TestZippedMachine(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Skipf("this test binary is not ELF (%v): nothing to compare with", err)
	}
	write := func(name string, mode os.FileMode, content []byte) string {
		p := filepath.Join(t.TempDir(), "x.zip")
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		h := &zip.FileHeader{Name: name, Method: zip.Store}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(content)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := zippedMachine(write("bootstrap", 0o755, exe))
	if err != nil || got != ef.Machine {
		t.Errorf("own binary: got %v, %v; want %v", got, err, ef.Machine)
	}
	if _, err := zippedMachine(write("handler", 0o755, exe)); err == nil {
		t.Error("a zip without bootstrap: want an error")
	}
	if _, err := zippedMachine(write("bootstrap", 0o644, exe)); err == nil {
		t.Error("a bootstrap without the executable bit: want an error")
	}
	if _, err := zippedMachine(write("bootstrap", 0o755, []byte("#!/bin/sh\n"))); err == nil {
		t.Error("a bootstrap that is not ELF: want an error")
	}
}
