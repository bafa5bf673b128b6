/* For the sanitize preset's mpi_sweep test only (LD_PRELOAD): dlclose does nothing, so that Open MPI's plugins
   (mca_*.so), unloaded at MPI_Finalize, are still mapped when LeakSanitizer reports at exit; their allocations then
   have named frames and tests/mpi/lsan-openmpi.supp can suppress them by library. Built without sanitizers. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
