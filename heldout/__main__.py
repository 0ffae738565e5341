from heldout.cli import main

if __name__ == "__main__":  # not when a multiprocessing worker imports it as __mp_main__
    main()
