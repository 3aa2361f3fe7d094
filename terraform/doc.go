// Package terraform holds the offline checks of the Terraform modules in its
// subdirectories (azure, aws) and their examples. Terraform cannot download
// providers in CI, so the tests parse the modules with hashicorp/hcl and
// evaluate what they write with a small evaluator of their own: every app
// setting is one the gateway reads, the variables' defaults are the gateway's
// (read from settings.Settings' struct tags), and the timeouts nest. The package
// has no code outside its tests.
package terraform
