package proc

import "testing"

// Inside a Slurm allocation (salloc, sbatch) SLURM_NTASKS is the
// allocation's tasks, not the world of a program started without srun;
// srun's tasks have SLURM_STEP_NUM_TASKS, their step's size.
func TestLauncherSizeSlurm(t *testing.T) {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"} {
		t.Setenv(v, "")
	}
	t.Setenv("SLURM_NTASKS", "8")
	if n, ok := LauncherSize(); ok {
		t.Errorf("salloc's SLURM_NTASKS=8 alone: size %d, want none", n)
	}
	t.Setenv("SLURM_STEP_NUM_TASKS", "2")
	if n, ok := LauncherSize(); !ok || n != 2 {
		t.Errorf("srun's SLURM_STEP_NUM_TASKS=2: size %d, %v; want 2", n, ok)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	if n, ok := LauncherSize(); !ok || n != 4 {
		t.Errorf("mpirun's OMPI_COMM_WORLD_SIZE=4: size %d, %v; want 4", n, ok)
	}
}
