# The batch template and the array sweep against a private slurmctld + slurmd on
# localhost (skipped, with the reason, where Slurm cannot be started).
minilst_add_script_test(NAME slurm_workflow LABELS "app;slurm"
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/slurm_workflow.sh)
set_tests_properties(slurm_workflow PROPERTIES PROCESSORS 2 SKIP_RETURN_CODE 77 TIMEOUT 600)
# Jobs stopped by their time limit, scancel and a limit shortened with scontrol keep every finished step.
minilst_add_script_test(NAME slurm_stop LABELS "app;slurm"
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/slurm_stop.sh)
set_tests_properties(slurm_stop PROPERTIES PROCESSORS 2 SKIP_RETURN_CODE 77 TIMEOUT 600)

