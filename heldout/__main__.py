from heldout.cli import main

main()
