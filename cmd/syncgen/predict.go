package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/syncgen/syncgen/predict"
	"github.com/syncgen/syncgen/runtime/costmodel"
)

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:      "predict",
		Usage:     "predict a plan's step time from a cost-model profile, without running it",
		ArgsUsage: "FILE.sync",
		Description: `predict replays the plan's step - each gradient's ready time from the
simulated backward, each stream's order, after edges, groups and waits -
against a cost model of the collectives, and prints the table a run would
print: per bucket its predicted time, algbw and busbw, then the step time,
exposed communication and overlap. Nothing is built or run.

--profile takes a profile file written by 'syncgen calibrate' on your
cluster, or the name of a built-in profile of a fabric you may not have
(` + strings.Join(costmodel.BuiltinNames(), ", ") + `), derived from NCCL's own tuning
tables. docs/predict.md says how the model works and how far off it was.

Examples:
   syncgen predict --np 8 --profile nvlink-h100 examples/resnet50.sync
   syncgen calibrate --np 4 -o cpu4.json && syncgen predict --np 4 --profile cpu4.json examples/bert_large.sync`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "np", Value: 2, Usage: "number of ranks to predict for"},
			profileFlag(),
			&cli.StringFlag{Name: "json", Usage: "also write the prediction as JSON to `FILE` (- for standard output, instead of the table)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("predict: give exactly one .sync file; usage: syncgen predict --np N --profile FILE|NAME FILE.sync", 2)
			}
			if err := needProfile(c); err != nil {
				return err
			}
			// --json is checked before the prediction, and written
			// through writeAtomic, which creates missing directories.
			j := target{flag: "--json", path: c.String("json"), what: "the prediction", example: "prediction.json", stdout: true}
			res, err := predictPlan(c, c.Args().First(), c.Int("np"), c.String("profile"), j)
			if err != nil {
				return err
			}
			if j.path == "-" {
				return res.WriteJSON("-", c.App.Writer)
			}
			if j.path != "" {
				var buf bytes.Buffer
				if err := res.WriteJSON("-", &buf); err != nil {
					return cli.Exit("predict: --json: "+err.Error(), 1)
				}
				if err := writeAtomic(j.path, buf.Bytes()); err != nil {
					return cli.Exit("predict: --json: "+err.Error(), 1)
				}
			}
			return res.Write(c.App.Writer)
		},
	}
}

// profileFlag is predict's and tune's --profile. It is not marked
// Required: urfave/cli answers a missing required flag by showing the help
// with the command's arguments as its topic, which lands in
// CommandNotFound ("unknown command FILE.sync") or prints the whole help
// with exit status 1. needProfile checks it instead.
func profileFlag() cli.Flag {
	return &cli.StringFlag{Name: "profile", Usage: "profile `FILE` (from syncgen calibrate) or built-in NAME (required)"}
}

// needProfile returns a usage error (status 2) when --profile is not
// given, saying what it takes.
func needProfile(c *cli.Context) error {
	if c.String("profile") != "" {
		return nil
	}
	return cli.Exit(fmt.Sprintf("%s: --profile is needed: a profile from syncgen calibrate (--profile FILE) or a built-in fabric (--profile NAME: %s)",
		c.Command.Name, strings.Join(costmodel.BuiltinNames(), ", ")), 2)
}

// predictPlan loads the plan at path and predicts it at np ranks with the
// profile that profileArg names, printing the profile's warning if any.
// The targets, files the command writes, are checked (checkTargets) once
// the plan is loaded, before the prediction.
func predictPlan(c *cli.Context, path string, np int, profileArg string, targets ...target) (*predict.Result, error) {
	if err := checkNP(c.Command.Name, np); err != nil {
		return nil, err
	}
	prog, err := loadOrReport(c, path)
	if err != nil {
		return nil, err
	}
	if err := checkTargets(c.Command.Name, path, prog.Imports, targets...); err != nil {
		return nil, err
	}
	prof, warning, err := costmodel.Resolve(profileArg, np)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: --profile: %v", c.Command.Name, err), 1)
	}
	if warning != "" {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", c.Command.Name, warning)
	}
	res, err := predict.Predict(prog, np, prof)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: %v", c.Command.Name, err), 1)
	}
	return res, nil
}
